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
  const documents = readdirSync(join(DEPLOY, 'k8s'))
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
    assert.ok(documents.length >= 6);
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
