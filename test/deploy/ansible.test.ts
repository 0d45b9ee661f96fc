import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { terminate, waitFor } from '../helpers/processes.js';
import { needsCommand, skipUnlessProvided } from '../helpers/skip.js';

/**
 * deploy/ansible/niclab-agent.yml, the playbook that installs the agent on an inventory of lab
 * hosts. Checked by ansible-playbook itself, then run for real against localhost (connection
 * local) into a directory of the test's own (niclab_root), with the steps that would change this
 * machine off: apt, npm ci and systemctl (systemd is not PID 1 here). What it installed is then
 * started as the unit would start it, with its EnvironmentFile, and must come online.
 */
const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PLAYBOOK = join(ROOT, 'deploy/ansible/niclab-agent.yml');
const INVENTORY = join(ROOT, 'deploy/ansible/inventory.example.ini');


/** One ansible-playbook run against localhost; its output and exit code. */
async function playLocal(vars: Record<string, string>): Promise<{ code: number; out: string }> {
  const extra = Object.entries({ niclab_hosts: 'localhost', niclab_become: 'false', ansible_python_interpreter: '/usr/bin/python3', ...vars }).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  const env = { ...process.env, ANSIBLE_NOCOLOR: '1', ANSIBLE_LOCAL_TEMP: join(work, 'ansible-local'), ANSIBLE_RETRY_FILES_ENABLED: 'false' };
  const done = await exec('ansible-playbook', ['-i', 'localhost,', '-c', 'local', PLAYBOOK, ...extra], { env, maxBuffer: 1 << 24 })
    .then((r) => ({ code: 0, out: r.stdout + r.stderr }), (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }));
  return done;
}

/** The PLAY RECAP's counts for localhost. */
const recap = (out: string) => Object.fromEntries([...(/^localhost\s+:\s+(.*)$/m.exec(out)?.[1] ?? '').matchAll(/(\w+)=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));

const work = mkdtempSync(join(tmpdir(), 'niclab-ansible-'));

describe('deploy/ansible/niclab-agent.yml', { skip: skipUnlessProvided(needsCommand('ansible-playbook', 'Debian: ansible-core')) }, () => {
  let niclab: TestNiclab | undefined;
  let agent: ReturnType<typeof spawn> | undefined;
  after(async () => {
    await terminate(agent);
    await niclab?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test('passes ansible-playbook --syntax-check with the example inventory, whose hosts it lists', async () => {
    const { stdout } = await exec('ansible-playbook', ['--syntax-check', '-i', INVENTORY, PLAYBOOK], { env: { ...process.env, ANSIBLE_NOCOLOR: '1' } });
    assert.match(stdout, /playbook: .*niclab-agent\.yml/);
    const { stdout: hosts } = await exec('ansible-playbook', ['--list-hosts', '-i', INVENTORY, PLAYBOOK], { env: { ...process.env, ANSIBLE_NOCOLOR: '1' } });
    assert.deepEqual(hosts.split('\n').map((l) => l.trim()).filter((l) => l.endsWith('.example')).sort(), ['lab-a.example', 'lab-b.example', 'lab-d.example']);
  });

  test('installs a built checkout, the unit and the host\'s settings; a second run changes nothing; what it installed comes online', async () => {
    niclab = await startNiclab([]);
    const archive = join(work, 'niclab.tgz');
    // The README's archive: the built checkout without git and node_modules.
    execFileSync('tar', ['czf', archive, '--exclude=./node_modules', '--exclude=./.git', '--exclude=./test-output', '.'], { cwd: ROOT });
    const root = join(work, 'root');
    const vars = {
      niclab_root: root, niclab_archive: archive, niclab_redis_url: niclab.env.REDIS_URL!, niclab_agent_id: 'played', niclab_agent_labels: 'rack=ansible',
      niclab_install_packages: 'false', niclab_npm_install: 'false', niclab_manage_service: 'false',
    };
    const first = await playLocal(vars);
    assert.equal(first.code, 0, first.out);
    assert.equal(recap(first.out).failed, 0, first.out);
    assert.ok(recap(first.out).changed! >= 4, first.out);
    assert.equal(readFileSync(join(root, 'etc/systemd/system/niclab-agent.service'), 'utf8'), readFileSync(join(ROOT, 'deploy/systemd/niclab-agent.service'), 'utf8'));
    const settings = readFileSync(join(root, 'etc/niclab/agent.env'), 'utf8');
    assert.match(settings, new RegExp(`^REDIS_URL=${niclab.env.REDIS_URL!.replace(/[.]/g, '\\.')}$`, 'm'));
    assert.match(settings, /^NICLAB_AGENT_ID=played$/m);
    const again = await playLocal(vars);
    assert.deepEqual([again.code, recap(again.out).changed], [0, 0], again.out);

    // As the unit starts it: /opt/niclab's CLI, with the EnvironmentFile's settings (systemd's
    // KEY=value lines). node_modules is what `npm ci --omit=dev` would have put there.
    symlinkSync(join(ROOT, 'node_modules'), join(root, 'opt/niclab/node_modules'));
    const fromFile = Object.fromEntries(settings.split('\n').filter((l) => /^[A-Z_]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    agent = spawn(process.execPath, [join(root, 'opt/niclab/services/cli/dist/main.js'), 'agent'], {
      cwd: join(root, 'opt/niclab'),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NICLAB_PREFIX: niclab.env.NICLAB_PREFIX!, NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_DATA_DIR: join(work, 'state'), ...fromFile },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    agent.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const online = await waitFor('the installed agent online', async () => {
      const { body } = await niclab!.client.call('getAgent', 'GET', '/v1/agents/played');
      return body?.online ? body : undefined;
    }, 30_000).catch((e: Error) => assert.fail(`${e.message}\n${stderr}`));
    assert.deepEqual(online.labels, { rack: 'ansible' });
  });

  test('without the settings it needs it stops before changing anything, naming them', async () => {
    const root = join(work, 'refused');
    const refused = await playLocal({ niclab_root: root, niclab_archive: join(work, 'niclab.tgz'), niclab_install_packages: 'false', niclab_manage_service: 'false' });
    assert.notEqual(refused.code, 0);
    assert.match(refused.out, /give -e niclab_archive=PATH .* and -e niclab_redis_url=redis:\/\/HOST:PORT/);
    assert.throws(() => readFileSync(join(root, 'etc/niclab/agent.env')), /ENOENT/);
  });
});
