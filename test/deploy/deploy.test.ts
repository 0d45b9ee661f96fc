import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseAllDocuments, parse } from 'yaml';
import { loadPolicy } from '@niclab/api/policy';

const DEPLOY = new URL('../../deploy/', import.meta.url).pathname;

describe('deploy/compose.yaml', () => {
  const compose = parse(readFileSync(join(DEPLOY, 'compose.yaml'), 'utf8')) as { services: Record<string, any>; volumes: Record<string, unknown> };
  const { redis, api, agent, prometheus, grafana, alertmanager } = compose.services;

  test('redis: AOF with fsync every second, never evicts, data on a volume, password required', () => {
    const args: string[] = redis.command;
    const flag = (name: string) => args[args.indexOf(name) + 1];
    assert.equal(flag('--appendonly'), 'yes');
    assert.equal(flag('--appendfsync'), 'everysec');
    assert.equal(flag('--maxmemory-policy'), 'noeviction');
    assert.ok(args.includes('--requirepass'));
    assert.ok(redis.volumes.some((v: string) => v.startsWith('redis-data:/data')) && 'redis-data' in compose.volumes);
    assert.deepEqual(redis.ports, ['127.0.0.1:6379:6379'], 'published on loopback only');
  });

  test('api: built from the Dockerfile, as the image\'s non-root user, Redis healthy first', () => {
    assert.equal(api.build.dockerfile, 'Dockerfile');
    assert.ok(existsSync(join(DEPLOY, api.build.context, api.build.dockerfile)));
    assert.equal(api.user, undefined, 'the image runs the API as node (uid 1000)');
    assert.equal(api.depends_on.redis.condition, 'service_healthy');
    assert.match(api.environment.REDIS_URL, /@redis:6379$/);
    // Open to anyone who reaches it, so published on loopback only.
    assert.equal(api.environment.NICLAB_AUTH, 'none');
    assert.deepEqual(api.ports, ['127.0.0.1:8080:8080']);
  });

  test('agent: host network, root with NET_ADMIN and NET_RAW only, not privileged', () => {
    assert.equal(agent.network_mode, 'host');
    assert.equal(agent.user, 'root');
    assert.deepEqual(agent.cap_drop, ['ALL']);
    assert.deepEqual([...agent.cap_add].sort(), ['NET_ADMIN', 'NET_RAW']);
    assert.notEqual(agent.privileged, true);
    assert.equal(agent.image, api.image, 'one image for both roles');
    assert.match(agent.environment.REDIS_URL, /@127\.0\.0\.1:6379$/);
    // Its file directory (jobs with `file`) is a mount of its own, not the image's file system.
    assert.ok(agent.volumes.some((v: string) => v.endsWith(`:${agent.environment.NICLAB_FILE_DIR}`)), 'NICLAB_FILE_DIR is mounted');
  });

  test('prometheus, alertmanager and grafana get the files of deploy/prometheus, deploy/alertmanager and deploy/grafana', () => {
    const mounts = (service: { volumes: string[] }) => service.volumes.filter((v) => v.startsWith('./')).map((v) => v.split(':') as [string, string, string?]);
    for (const [from] of [...mounts(prometheus), ...mounts(grafana), ...mounts(alertmanager)]) assert.ok(existsSync(join(DEPLOY, from)), `${from} exists`);
    // Prometheus sends its alerts to the alertmanager service, which reads deploy/alertmanager.
    const alerting = parse(readFileSync(join(DEPLOY, 'prometheus/prometheus.yml'), 'utf8')).alerting.alertmanagers[0].static_configs[0].targets[0];
    assert.equal(alerting, 'alertmanager:9093');
    assert.ok(mounts(alertmanager).some(([from, to]) => from === './alertmanager/alertmanager.yml' && to === '/etc/alertmanager/alertmanager.yml'));
    const provider = parse(readFileSync(join(DEPLOY, 'grafana/provisioning/dashboards/niclab.yaml'), 'utf8')).providers[0].options.path;
    assert.ok(mounts(grafana).some(([from, to]) => from === './grafana/dashboards' && to === provider), 'dashboards mounted where the provider looks');
    const scrape = parse(readFileSync(join(DEPLOY, 'prometheus/prometheus.yml'), 'utf8')).scrape_configs[0].static_configs[0].targets[0];
    assert.equal(scrape, 'api:8080', 'Prometheus scrapes the api service');
  });
});

describe('deploy/k8s: valid against the Kubernetes schemas', () => {
  const documents = [...readdirSync(join(DEPLOY, 'k8s')), ...readdirSync(join(DEPLOY, 'k8s/sentinel')).map((f) => `sentinel/${f}`)]
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseAllDocuments(readFileSync(join(DEPLOY, 'k8s', f), 'utf8')).map((d) => ({ file: f, object: d.toJS() as { apiVersion: string; kind: string; metadata: { name: string }; spec?: any } })));
  const find = (kind: string, name: string) => documents.find((d) => d.object.kind === kind && d.object.metadata.name === name)?.object;

  test('every manifest validates (kubernetes-models, the API schemas, offline)', async () => {
    for (const { file, object } of documents) {
      const group = object.apiVersion.includes('/') ? object.apiVersion : `core/${object.apiVersion}`;
      const { [object.kind]: Model } = (await import(`kubernetes-models/${group.replace(/^core\//, '')}/${object.kind}`)) as Record<string, new (o: unknown) => { validate(): void }>;
      assert.ok(Model, `${file}: no model for ${object.apiVersion} ${object.kind}`);
      assert.doesNotThrow(() => new Model(object).validate(), `${file}: ${object.kind} ${object.metadata.name}`);
    }
    assert.ok(documents.length >= 13);
  });

  test('a broken manifest fails the same validation', async () => {
    const { DaemonSet } = await import('kubernetes-models/apps/v1/DaemonSet');
    const agent = structuredClone(find('DaemonSet', 'niclab-agent')) as any;
    agent.spec.template.spec.hostNetwork = 'yes';
    assert.throws(() => new DaemonSet(agent).validate());
  });

  test('agent DaemonSet: host network, DNS for it, capabilities not privilege, lab hosts only, id from the node', () => {
    const pod = find('DaemonSet', 'niclab-agent')!.spec.template.spec;
    assert.equal(pod.hostNetwork, true);
    assert.equal(pod.dnsPolicy, 'ClusterFirstWithHostNet');
    assert.deepEqual(pod.nodeSelector, { 'niclab.io/lab-host': 'true' });
    const [c] = pod.containers;
    assert.deepEqual(c.securityContext.capabilities, { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW'] });
    assert.equal(c.securityContext.privileged, false);
    assert.equal(c.env.find((e: { name: string }) => e.name === 'NICLAB_AGENT_ID').valueFrom.fieldRef.fieldPath, 'spec.nodeName');
    const files = c.env.find((e: { name: string }) => e.name === 'NICLAB_FILE_DIR').value;
    const mount = c.volumeMounts.find((m: { mountPath: string }) => m.mountPath === files);
    assert.equal(pod.volumes.find((v: { name: string }) => v.name === mount.name).hostPath.path, files, "the node's own directory");
  });

  test('API Deployment and Service, scraped by Prometheus; Redis persistent with AOF', () => {
    const api = find('Deployment', 'niclab-api')!.spec.template;
    assert.equal(api.metadata.annotations['prometheus.io/scrape'], 'true');
    assert.equal(api.spec.securityContext.runAsNonRoot, true);
    assert.equal(api.spec.containers[0].readinessProbe.httpGet.path, '/readyz');
    assert.ok(find('Service', 'niclab-api'));
    const redis = find('StatefulSet', 'redis')!.spec;
    assert.ok(redis.volumeClaimTemplates.length === 1);
    const args: string[] = redis.template.spec.containers[0].args;
    assert.equal(args[args.indexOf('--appendfsync') + 1], 'everysec');
    assert.equal(args[args.indexOf('--maxmemory-policy') + 1], 'noeviction');
  });

  test('the API reads its access policy from a Secret, and the example policies load', () => {
    const pod = find('Deployment', 'niclab-api')!.spec.template.spec;
    const path = pod.containers[0].env.find((e: { name: string }) => e.name === 'NICLAB_POLICY_FILE').value as string;
    const mount = pod.containers[0].volumeMounts.find((m: { mountPath: string }) => path.startsWith(`${m.mountPath}/`));
    assert.equal(pod.volumes.find((v: { name: string }) => v.name === mount.name).secret.secretName, 'niclab-policy');
    const secret = find('Secret', 'niclab-policy') as unknown as { stringData: Record<string, string> };
    const dir = mkdtempSync(join(tmpdir(), 'niclab-deploy-'));
    writeFileSync(join(dir, 'policy.yaml'), secret.stringData['policy.yaml']!);
    assert.equal(loadPolicy(join(dir, 'policy.yaml')).tokens.length, 0);
    const example = loadPolicy(join(DEPLOY, 'policy.example.yaml'));
    assert.deepEqual(example.tokens.map((t) => [t.name, t.scope]), [['grafana', 'read'], ['nightly-ci', 'run'], ['lab-admin', 'admin']]);
    assert.deepEqual(example.tokens[1]!.limits, { maxDurationSeconds: 600, maxStreams: 16, maxUdpBitsPerSecond: 10000000000, maxRunsPerJob: 1000, maxConcurrentJobs: 2, agentLabels: { rack: 'r1' }, interfaces: ['eth1', 'eth2'] });
  });
});

/** The Redis image tag every deploy file pins: 7.2, the last BSD-licensed Redis (README, "Versions and licences"). */
const PINNED_REDIS = /^(\$\{REDIS_IMAGE:-)?docker\.io\/library\/redis:7\.2\}?$/;
const SCRIPTS = join(DEPLOY, 'redis');

describe('deploy/compose.sentinel.yaml: a master, a replica and three sentinels under the API and an agent', () => {
  const compose = parse(readFileSync(join(DEPLOY, 'compose.sentinel.yaml'), 'utf8')) as { services: Record<string, any>; volumes: Record<string, unknown> };
  const { services } = compose;
  const redisNodes = ['redis-0', 'redis-1'];
  const sentinels = ['sentinel-0', 'sentinel-1', 'sentinel-2'];

  test('every Redis and sentinel runs deploy/redis\'s script from its mount, with its data on a volume of its own, on loopback only', () => {
    assert.deepEqual(Object.keys(services).sort(), [...redisNodes, ...sentinels, 'agent', 'api'].sort());
    for (const name of [...redisNodes, ...sentinels]) {
      const service = services[name];
      assert.match(service.image, PINNED_REDIS, `${name}: the pinned Redis`);
      assert.equal(service.network_mode, 'host', name);
      const [shell, script] = service.entrypoint as string[];
      assert.equal(shell, 'sh');
      const mount = (service.volumes as string[]).find((v) => v.endsWith(':/etc/niclab-redis:ro'))!;
      assert.equal(join(DEPLOY, mount.split(':')[0]!), `${SCRIPTS}`, `${name} mounts deploy/redis`);
      assert.ok(existsSync(join(SCRIPTS, script!.replace('/etc/niclab-redis/', ''))), `${name}: ${script} is in deploy/redis`);
      assert.equal(script, `/etc/niclab-redis/${name.startsWith('redis') ? 'redis-node.sh' : 'sentinel-node.sh'}`);
      const data = (service.volumes as string[]).find((v) => v.endsWith(':/data'))!.split(':')[0]!;
      assert.ok(data in compose.volumes && data.startsWith(name), `${name}: its own volume`);
      const env = service.environment as Record<string, string>;
      assert.equal(env.REDIS_BIND ?? env.SENTINEL_BIND, '127.0.0.1', `${name}: loopback only`);
    }
  });

  test('they agree: the sentinels each names, the first master, the master\'s name, the password; the API and the agent reach them by it', () => {
    const envOf = (name: string) => services[name].environment as Record<string, any>;
    const sentinelAddresses = sentinels.map((name) => `${envOf(name).SENTINEL_ANNOUNCE_HOST}:${envOf(name).SENTINEL_PORT}`);
    const first = `${envOf('redis-0').REDIS_ANNOUNCE_HOST}:${envOf('redis-0').REDIS_PORT}`;
    for (const name of [...redisNodes, ...sentinels]) {
      assert.deepEqual(envOf(name).SENTINELS.split(' '), sentinelAddresses, `${name}: SENTINELS`);
      assert.equal(envOf(name).REDIS_FIRST_MASTER, first, `${name}: redis-0 is the first master`);
      assert.equal(envOf(name).SENTINEL_MASTER, 'niclab');
      assert.equal(envOf(name).REDIS_PASSWORD, '${REDIS_PASSWORD:-change-me}');
    }
    for (const name of sentinels) assert.equal(envOf(name).SENTINEL_QUORUM, '2');
    for (const name of ['api', 'agent']) {
      const env = envOf(name);
      assert.equal(services[name].network_mode, 'host');
      assert.equal(env.NICLAB_REDIS_SENTINELS, sentinelAddresses.join(','), `${name}: the sentinels`);
      assert.equal(env.NICLAB_REDIS_MASTER, 'niclab');
      assert.match(env.REDIS_URL, /^redis:\/\/:\$\{REDIS_PASSWORD:-change-me\}@/);
    }
    assert.equal(envOf('api').NICLAB_REDIS_WAIT_REPLICAS, '1', 'acknowledged means on the replica');
    assert.equal(envOf('api').NICLAB_HOST, '127.0.0.1', 'no policy, so loopback only');
    assert.deepEqual(services.agent.cap_add, services.agent.cap_add.filter((c: string) => ['NET_ADMIN', 'NET_RAW'].includes(c)));
  });

  test('the single-Redis files pin the same Redis', () => {
    const single = parse(readFileSync(join(DEPLOY, 'compose.yaml'), 'utf8')) as { services: Record<string, any> };
    assert.match(single.services.redis.image, PINNED_REDIS);
  });
});

describe('deploy/compose.sentinel.yaml started for real (its Redis and sentinels by their own entrypoints and environment, ports mapped to free ones)', () => {
  test('a replica in sync, a password required, niclab connecting by the API\'s settings; the master SIGKILLed: the sentinels promote the replica within the file\'s timings and the old master, started again, rejoins as its replica', { timeout: 60_000 }, async () => {
    const { startSentinelSet, ask } = await import('../helpers/sentinel.js');
    const { loadConfig } = await import('@niclab/shared/runtime/config');
    const { createRedis } = await import('@niclab/shared/runtime/redis');
    const { waitFor } = await import('../helpers/processes.js');
    const set = await startSentinelSet();
    const niclab = createRedis(loadConfig(set.apiEnv).redisUrl!, { name: 'deploy-test' });
    try {
      assert.match(set.nodes.get('redis-0')!.output(), /starts as the master/);
      assert.match(set.nodes.get('redis-1')!.output(), new RegExp(`starts as a replica of 127\\.0\\.0\\.1:${set.port('redis-0')}`));
      // Without the password a Redis of the set answers nothing.
      const { Redis } = await import('ioredis');
      const anonymous = new Redis({ port: set.port('redis-0'), lazyConnect: true, enableReadyCheck: false, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      anonymous.on('error', () => undefined);
      await anonymous.connect();
      await assert.rejects(anonymous.get('x'), /NOAUTH/);
      anonymous.disconnect();
      await niclab.set('deploy-test', 'before');
      const killedAt = Date.now();
      set.signal('redis-0', 'SIGKILL');
      await waitFor('the sentinels to promote redis-1', async () => (await set.master()) === set.port('redis-1'), 30_000, 100);
      const promotedMs = Date.now() - killedAt;
      await waitFor('niclab to write on the new master', () => niclab.set('deploy-test', 'after').then(() => true, () => false), 20_000, 100);
      const writableMs = Date.now() - killedAt;
      const restarted = set.start('redis-0');
      await waitFor('redis-0 back as the replica', async () => /role:slave[\s\S]*master_link_status:up/.test(await ask<string>(set.port('redis-0'), 'info', 'replication')), 20_000, 100);
      assert.match(restarted.output(), new RegExp(`starts as a replica of 127\\.0\\.0\\.1:${set.port('redis-1')}`));
      assert.equal(await ask(set.port('redis-0'), 'get', 'deploy-test'), 'after', 'it has the new master\'s data');
      console.log(`compose's set: the sentinels (down-after-milliseconds 5000) promoted the replica ${promotedMs} ms after the kill; niclab wrote again after ${writableMs} ms`);
      // down-after-milliseconds 5000, then the vote and the promotion.
      assert.ok(promotedMs >= 5000 && promotedMs < 15_000, `promoted after ${promotedMs} ms`);
    } finally {
      niclab.disconnect();
      await set.stop();
    }
  });
});

describe('deploy/k8s/sentinel: Redis with Sentinel in place of redis.yaml', () => {
  const documents = parseAllDocuments(readFileSync(join(DEPLOY, 'k8s/sentinel/redis-sentinel.yaml'), 'utf8')).map((d) => d.toJS() as { kind: string; metadata: { name: string }; spec?: any; data?: Record<string, string> });
  const find = (kind: string, name: string) => documents.find((d) => d.kind === kind && d.metadata.name === name)!;
  const envOf = (container: { env: { name: string; value?: string }[] }) => Object.fromEntries(container.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));

  test('the scripts ConfigMap holds deploy/redis\'s scripts as they are, and both StatefulSets run them from it', () => {
    const scripts = find('ConfigMap', 'niclab-redis-scripts').data!;
    for (const file of readdirSync(SCRIPTS)) assert.equal(scripts[file], readFileSync(join(SCRIPTS, file), 'utf8'), `deploy/redis/${file} and the ConfigMap's differ: copy it in`);
    assert.deepEqual(Object.keys(scripts).sort(), readdirSync(SCRIPTS).sort());
    for (const [name, script] of [['redis-node', 'redis-node.sh'], ['sentinel', 'sentinel-node.sh']] as const) {
      const pod = find('StatefulSet', name).spec.template.spec;
      assert.equal(pod.volumes.find((v: { name: string }) => v.name === 'scripts').configMap.name, 'niclab-redis-scripts');
      assert.deepEqual(pod.containers[0].command, ['sh', `/etc/niclab-redis/${script}`]);
      assert.match(pod.containers[0].image, PINNED_REDIS, `${name}: the pinned Redis`);
    }
  });

  test('two Redis and three sentinels that agree, by their pods\' DNS names; the API and the agents read the same sentinels from the ConfigMap', async () => {
    const redis = find('StatefulSet', 'redis-node').spec;
    const sentinel = find('StatefulSet', 'sentinel').spec;
    assert.deepEqual([redis.replicas, sentinel.replicas], [2, 3]);
    assert.equal(find('Service', redis.serviceName).spec.clusterIP, 'None');
    assert.equal(find('Service', sentinel.serviceName).spec.clusterIP, 'None');
    const redisEnv = envOf(redis.template.spec.containers[0]);
    const sentinelEnv = envOf(sentinel.template.spec.containers[0]);
    const sentinels = [0, 1, 2].map((i) => `sentinel-${i}.${sentinel.serviceName}.niclab.svc.cluster.local:26379`);
    assert.deepEqual(redisEnv.SENTINELS!.split(' '), sentinels);
    assert.deepEqual(sentinelEnv.SENTINELS!.split(' '), sentinels);
    assert.equal(redisEnv.REDIS_FIRST_MASTER, `redis-node-0.${redis.serviceName}.niclab.svc.cluster.local:6379`);
    assert.equal(sentinelEnv.REDIS_FIRST_MASTER, redisEnv.REDIS_FIRST_MASTER);
    assert.equal(redisEnv.REDIS_ANNOUNCE_HOST, `$(POD_NAME).${redis.serviceName}.niclab.svc.cluster.local`);
    assert.equal(sentinelEnv.SENTINEL_QUORUM, '2');
    assert.equal(redis.volumeClaimTemplates.length, 1);
    const settings = find('ConfigMap', 'niclab-redis-sentinel').data!;
    assert.deepEqual(settings.NICLAB_REDIS_SENTINELS!.split(','), sentinels);
    assert.equal(settings.NICLAB_REDIS_MASTER, sentinelEnv.SENTINEL_MASTER);
    assert.equal(settings.NICLAB_REDIS_WAIT_REPLICAS, '1');
    // What the API makes of them beside its REDIS_URL: a valid Sentinel address with the password.
    const { loadConfig } = await import('@niclab/shared/runtime/config');
    assert.equal(loadConfig({ ...settings, REDIS_URL: 'redis://:pw@redis.niclab.svc:6379' }).redisUrl, `redis-sentinel://:pw@${sentinels.join(',')}/niclab`);
    for (const [file, kind, name] of [['api.yaml', 'Deployment', 'niclab-api'], ['agent.yaml', 'DaemonSet', 'niclab-agent']] as const) {
      const object = parseAllDocuments(readFileSync(join(DEPLOY, 'k8s', file), 'utf8')).map((d) => d.toJS()).find((o) => o.kind === kind && o.metadata.name === name);
      assert.deepEqual(object.spec.template.spec.containers[0].envFrom, [{ configMapRef: { name: 'niclab-redis-sentinel', optional: true } }], `${file} reads the Sentinel settings when they exist`);
    }
  });

  test('the single Redis pins the same Redis', () => {
    const single = parseAllDocuments(readFileSync(join(DEPLOY, 'k8s/redis.yaml'), 'utf8')).map((d) => d.toJS()).find((o) => o.kind === 'StatefulSet');
    assert.match(single.spec.template.spec.containers[0].image, PINNED_REDIS);
  });
});
