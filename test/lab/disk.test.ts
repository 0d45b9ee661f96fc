import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { command } from '@niclab/shared/runtime/command';
import { flow, mbit, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';

/**
 * Disk against memory (issue 30, part 4; seed 003's ftp at 30 Mbit/s where netperf did 430).
 * Each end's file directory is an ext4 file system on a loop device of its own, mounted before
 * the lab's agents start (their mount namespaces copy it); both agents sit in a blkio cgroup
 * that throttles reads of the source's device to 20 MiB/s and writes to the sink's to 5 MiB/s
 * (cgroup v1's blk-throttle, which counts the I/O a process issues itself: synchronous writes,
 * not the page cache's writeback). The links are shaped to 500 Mbit/s, so memory to memory is
 * no CPU hog and far above both disks. The references are dd, from the same cgroup, into and
 * from the same directories, and the loop devices' own sector counters.
 */
const SINK_BPS = 5 * 1024 * 1024;
const SOURCE_BPS = 20 * 1024 * 1024;
const SOURCE_BYTES = 64 * 1024 * 1024;
const BLOCK = 128 * 1024;
const BLKIO = '/sys/fs/cgroup/blkio';

interface Device {
  image: string;
  loop: string;
  mount: string;
  majorMinor: string;
}

/** An ext4 file system on a loop device of its own, mounted at `mount`. */
async function loopFileSystem(root: string, name: string, size: string): Promise<Device> {
  const image = join(root, `${name}.img`);
  const mount = join(root, name);
  mkdirSync(mount);
  await command('truncate', ['-s', size, image]);
  const loop = (await command('losetup', ['-f', '--show', image])).trim();
  const device: Device = { image, loop, mount, majorMinor: (await command('lsblk', ['-dno', 'MAJ:MIN', loop])).trim() };
  devices.push(device);
  await command('mkfs.ext4', ['-q', loop]);
  await command('mount', [loop, mount]);
  return device;
}

/** Sectors read and written by a block device so far (/sys/block/DEV/stat: the kernel's count). */
function sectors(device: Device): { read: number; written: number } {
  const fields = readFileSync(`/sys/block/${basename(device.loop)}/stat`, 'utf8').trim().split(/\s+/).map(Number);
  return { read: fields[2]!, written: fields[6]! };
}

/** The blkio cgroup a process is in now (cgroup v1), as a directory. */
function blkioOf(pid: number): string {
  const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').find((l) => /^\d+:blkio:/.test(l));
  return join(BLKIO, line ? line.split(':')[2]! : '/');
}

/**
 * dd started from inside `cgroup` (this process joins it, forks dd, and goes back: dd is in it
 * from its first byte); its bytes and seconds as it reports them.
 */
async function ddIn(cgroup: string, args: string[]): Promise<{ bytes: number; seconds: number; bitsPerSecond: number }> {
  const home = blkioOf(process.pid);
  writeFileSync(join(cgroup, 'cgroup.procs'), String(process.pid));
  let child;
  try {
    child = spawn('dd', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } finally {
    writeFileSync(join(home, 'cgroup.procs'), String(process.pid));
  }
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const m = /^(\d+) bytes .* copied, ([\d.]+) s/m.exec(stderr);
  assert.ok(code === 0 && m, `dd ${args.join(' ')}: ${stderr}`);
  const bytes = Number(m[1]);
  const seconds = Number(m[2]);
  return { bytes, seconds, bitsPerSecond: (bytes * 8) / seconds };
}

const within = (value: number, reference: number, share: number) => Math.abs(value / reference - 1) <= share;
const mbits = (bits: number) => `${mbit(bits).toFixed(1)} Mbit/s`;

const devices: Device[] = [];
let root: string;
let cgroup: string;
let t: TestLab;
let source: Device;
let sink: Device;
/** dd's synchronous writes into the sink's directory from the agents' cgroup (the first test's). */
let ddWrite: Awaited<ReturnType<typeof ddIn>> | undefined;

describe('disk against memory: a sink on a throttled device', { skip: NOT_ROOT }, () => {
  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'niclab-disk-'));
    source = await loopFileSystem(root, 'source', '100M');
    sink = await loopFileSystem(root, 'sink', '100M');
    writeFileSync(join(source.mount, 'source.bin'), randomBytes(SOURCE_BYTES), { flush: true });
    cgroup = join(BLKIO, `niclab-${basename(root)}`);
    mkdirSync(cgroup);
    writeFileSync(join(cgroup, 'blkio.throttle.read_bps_device'), `${source.majorMinor} ${SOURCE_BPS}`);
    writeFileSync(join(cgroup, 'blkio.throttle.write_bps_device'), `${sink.majorMinor} ${SINK_BPS}`);
    t = await startTestLab(2, '500mbit', undefined, { A: source.mount, B: sink.mount });
    // Both agents (and the engines they start) in the throttled cgroup from now on.
    for (const host of t.lab.hosts) writeFileSync(join(cgroup, 'cgroup.procs'), String(host.agentPid));
  });

  after(async () => {
    // Each step whatever the one before did: the lab's processes first (they hold the cgroup and the mounts).
    await t?.close().catch(() => undefined);
    if (cgroup && existsSync(cgroup)) {
      try {
        rmdirSync(cgroup);
      } catch (error) {
        console.error(`rmdir ${cgroup}: ${(error as Error).message}`);
      }
    }
    for (const device of devices.reverse()) {
      await command('umount', [device.mount]).catch(() => undefined);
      await command('losetup', ['-d', device.loop]).catch(() => undefined);
    }
    if (root) rmSync(root, { recursive: true, force: true });
  });

  test('a dsync sink on a device throttled to 5 MiB/s: the run names the sink disk, its rate and the sink disk write rate beside dd into the same directory from the same cgroup, the source disk read rate beside dd, memory to memory far above', async (ctx) => {
    const before = { source: sectors(source), sink: sectors(sink) };
    const job = await t.client.succeed({
      engine: 'builtin', duration: 2, bufferLength: BLOCK, flows: [flow('A', 'B')],
      file: { source: 'source.bin', sink: true, ioMode: 'dsync', dropCache: true, probeSeconds: 2 },
    }, 90_000);
    const afterJob = { source: sectors(source), sink: sectors(sink) };
    const [memory, file] = job.runs.map((r: any) => r.flows[0]);
    const report = (await t.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`)).body;
    const [stage] = report.stages;
    // The references, after the job, from the same cgroup: dd's synchronous writes into the sink's
    // directory, and dd's reads of the same source with its cache dropped the same way.
    ddWrite = await ddIn(cgroup, ['if=/dev/zero', `of=${join(sink.mount, 'dd.bin')}`, `bs=${BLOCK}`, 'count=160', 'oflag=dsync']);
    await command('dd', [`if=${join(source.mount, 'source.bin')}`, 'iflag=nocache', 'count=0', 'status=none']);
    const ddRead = await ddIn(cgroup, [`if=${join(source.mount, 'source.bin')}`, 'of=/dev/null', `bs=${BLOCK}`, 'count=320']);
    const { sink: sinkFile, source: sourceFile } = file.file;
    // Each figure beside what it is checked against, in the test's output (the README quotes them).
    ctx.diagnostic(`memory ${mbits(memory.bitsPerSecond)}; file ${mbits(file.bitsPerSecond)} (${file.receiver.bytes} B in ${file.receiver.realSeconds.toFixed(2)} s); sink disk ${mbits(sinkFile.disk.bitsPerSecond)}, dd oflag=dsync ${mbits(ddWrite.bitsPerSecond)}; source disk ${mbits(sourceFile.disk.bitsPerSecond)}, dd read ${mbits(ddRead.bitsPerSecond)}`);
    ctx.diagnostic(`stage: ${stage.slowest}: ${stage.reason}; verdict ${file.bottleneck.reason}`);
    assert.equal(stage.slowest, 'sink disk');
    assert.equal(file.bottleneck.verdict, 'sink disk', file.bottleneck.reason);
    assert.ok(within(file.bitsPerSecond, ddWrite.bitsPerSecond, 0.1), `the file moved at ${mbits(file.bitsPerSecond)}, dd wrote ${mbits(ddWrite.bitsPerSecond)}`);
    assert.ok(within(sinkFile.disk.bitsPerSecond, ddWrite.bitsPerSecond, 0.1), `sink disk write rate beside dd: ${mbits(sinkFile.disk.bitsPerSecond)} against ${mbits(ddWrite.bitsPerSecond)}`);
    assert.ok(within(sourceFile.disk.bitsPerSecond, ddRead.bitsPerSecond, 0.1), `source disk read rate beside dd: ${mbits(sourceFile.disk.bitsPerSecond)} against ${mbits(ddRead.bitsPerSecond)}`);
    // Through the 500 Mbit/s shaper: far above the sink's 5 MiB/s, whatever another file does to the CPU.
    assert.ok(memory.bitsPerSecond > 3 * sinkFile.disk.bitsPerSecond, 'memory to memory far above the sink disk');
    assert.equal(stage.transferShare, file.bitsPerSecond / memory.bitsPerSecond);
    assert.deepEqual([sourceFile.cacheDropped, file.file.ioMode, sinkFile.writtenBytes, sinkFile.removed], [true, 'dsync', file.receiver.bytes, true]);
    // The kernel's count: the sink's device wrote at least the sink's file and the probe's, the
    // source's read at least the transfer's bytes and the probe's (each after its cache drop).
    const written = (afterJob.sink.written - before.sink.written) * 512;
    const read = (afterJob.source.read - before.source.read) * 512;
    assert.ok(written >= sinkFile.writtenBytes + sinkFile.disk.bytes, `the sink's device wrote ${written} B`);
    assert.ok(read >= file.sender.bytes + sourceFile.disk.bytes, `the source's device read ${read} B`);
    assert.deepEqual(readdirSync(sink.mount).filter((n) => n.startsWith('.niclab-')), [], 'no temporary file left');
  });

  test("iperf3's sink made synchronous by its file's S attribute (chattr +S): the run names the sink disk, its rate beside dd's", async (ctx) => {
    const reference = ddWrite ?? (await ddIn(cgroup, ['if=/dev/zero', `of=${join(sink.mount, 'dd.bin')}`, `bs=${BLOCK}`, 'count=160', 'oflag=dsync']));
    const submitted = await t.client.submit({ engine: 'iperf3', duration: 2, bufferLength: BLOCK, flows: [flow('A', 'B')], file: { sink: true, ioMode: 'dsync', probeSeconds: 1 }, sweep: { io: ['file'] } });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    // The kernel's own word on the sink while iperf3 writes it: lsattr shows its S attribute.
    // The agent creates the file, then runs chattr: a read between the two shows no S yet (a
    // fresh-clone run at 236ab64 read '--------------e-------' there), so read until S shows
    // or the time is up; a sink that never gets it fails below.
    let attributes = '';
    const deadline = Date.now() + 20_000;
    while (!attributes.includes('S') && Date.now() < deadline) {
      const name = readdirSync(sink.mount).find((n) => n.endsWith('.sink'));
      if (name) attributes = (await command('lsattr', ['-d', join(sink.mount, name)]).catch(() => '')).split(/\s+/)[0] ?? '';
      if (!attributes.includes('S')) await new Promise((r) => setTimeout(r, 20));
    }
    const { job } = await t.client.finish(submitted.body.id, 60_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job.error ?? job.runs));
    const [f] = job.runs[0].flows;
    ctx.diagnostic(`iperf3 file ${mbits(f.bitsPerSecond)} (${f.receiver.bytes} B in ${f.receiver.realSeconds.toFixed(2)} s); sink disk ${mbits(f.file.sink.disk.bitsPerSecond)}; dd oflag=dsync ${mbits(reference.bitsPerSecond)}; sink attributes ${attributes}; verdict ${f.bottleneck.reason}`);
    assert.match(attributes, /S/, 'the sink file had its synchronous-update attribute while iperf3 wrote it');
    assert.deepEqual(f.diagnostics.receiver.file.commands, [['chattr', '+S', f.diagnostics.receiver.file.path]]);
    assert.equal(f.bottleneck.verdict, 'sink disk', f.bottleneck.reason);
    assert.ok(within(f.bitsPerSecond, reference.bitsPerSecond, 0.1), `iperf3's sink at ${mbits(f.bitsPerSecond)}, dd at ${mbits(reference.bitsPerSecond)}`);
    assert.equal(f.file.sink.writtenBytes, f.receiver.bytes);
  });
});
