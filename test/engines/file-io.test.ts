import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readlinkSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ENGINES } from '@niclab/agent/engines/registry';
import { useBuiltEngineChildren } from '@niclab/agent/engines/child';
import { dropPageCache } from '@niclab/agent/files/file-leg';
import { command } from '@niclab/shared/runtime/command';
import type { EngineParams } from '@niclab/shared/domain/task';
import { enginePair } from '../helpers/engines.js';

useBuiltEngineChildren();

/**
 * The engines' file ends on loopback (iperf3's -F, and the builtin's own): what reaches the sink
 * is the source's bytes, the sender stops at the file's end, a dsync sink is opened O_DSYNC (the
 * kernel's /proc/PID/fdinfo says so), and the cache drop empties the page cache of the file (the
 * kernel's mincore, through util-linux's fincore).
 */
// More than loopback's socket buffers hold (iperf3's server stops reading when its client reaches the
// end, so a file the buffers swallow whole may reach its sink not at all), and not a whole number
// of blocks: the last one is short.
const SIZE = 24 * 1024 * 1024 + 12_345;
const params = (duration: number): EngineParams => ({ protocol: 'tcp', test: 'stream', duration, bufferLength: 128 * 1024, streams: 1, noDelay: false, interval: 1 });
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

let dir: string;
let source: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'niclab-engine-files-'));
  source = join(dir, 'source.bin');
  writeFileSync(source, randomBytes(SIZE));
});
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('file ends on loopback', () => {
  for (const name of ['builtin', 'iperf3'] as const) {
    test(`${name}: the sink holds the source byte for byte; the sender stops at the file's end`, async () => {
      const sink = join(dir, `${name}.sink`);
      writeFileSync(sink, '');
      const [sender, receiver] = await enginePair(ENGINES[name]!, params(5), { file: { source, sink } });
      assert.equal(sender.error ?? receiver.error, null, JSON.stringify(sender.error ?? receiver.error));
      assert.equal(sender.figures!.bytes, SIZE, 'the sender sent the whole file');
      assert.ok(sender.figures!.realSeconds < 4, `it stopped at the end of the file, not the run's 5 s (${sender.figures!.realSeconds} s)`);
      const written = readFileSync(sink);
      assert.equal(written.length, receiver.figures!.bytes, 'the sink holds what the receiver counted');
      if (name === 'builtin') {
        assert.equal(sha256(sink), sha256(source));
      } else {
        // iperf3's server stops reading when the client ends the test: the sink is the file's first bytes, perhaps not all.
        assert.ok(written.length > 0 && written.equals(readFileSync(source).subarray(0, written.length)), `iperf3's sink is the source's first ${written.length} B`);
      }
    });
  }

  test("the builtin's dsync sink is open O_DSYNC while it writes (/proc/PID/fdinfo)", async () => {
    const sink = join(dir, 'dsync.sink');
    writeFileSync(sink, '');
    const pids: number[] = [];
    const seen: { flags: number | null } = { flags: null };
    const watch = setInterval(() => {
      for (const pid of pids) {
        try {
          const fd = readdirSync(`/proc/${pid}/fd`).find((n) => readlinkSync(`/proc/${pid}/fd/${n}`) === sink);
          if (fd) seen.flags = parseInt(/^flags:\s+([0-7]+)/m.exec(readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'))![1]!, 8);
        } catch {
          // the child is gone
        }
      }
    }, 5);
    try {
      const [sender, receiver] = await enginePair(ENGINES.builtin!, params(1), { pids, file: { source, sink, dsync: true } });
      assert.equal(sender.error ?? receiver.error, null);
    } finally {
      clearInterval(watch);
    }
    const { flags } = seen;
    assert.ok(flags !== null, "the sink's descriptor was seen");
    assert.equal(flags & 0o10000, 0o10000, `O_DSYNC in ${flags.toString(8)}`);
  });

  // A sink that stopped taking data must end its end, not leave its socket paused until the deadline (here 15 s).
  test("the builtin's sink on a full device (/dev/full: ENOSPC) fails its end file_io, saying so, not a rate of writes that never landed", async () => {
    const [sender, receiver] = await enginePair(ENGINES.builtin!, params(1), { file: { source, sink: '/dev/full' }, signal: AbortSignal.timeout(15_000) });
    assert.equal(receiver.figures, null);
    assert.equal(receiver.error?.code, 'file_io', JSON.stringify(receiver.error));
    assert.match(receiver.error!.message, /writing the sink: ENOSPC/);
    assert.notEqual(sender.error?.code, undefined, `the sender did not finish its file as if it had been taken: ${JSON.stringify(sender)}`);
  });

  test("the cache drop leaves none of the file's pages in the page cache (fincore), a file just written included", async () => {
    const fresh = join(dir, 'fresh.bin');
    writeFileSync(fresh, randomBytes(1024 * 1024)); // its pages dirty: DONTNEED alone would keep them
    const resident = async (path: string) => Number((await command('fincore', ['-bno', 'RES', path])).trim());
    readFileSync(source);
    assert.ok((await resident(source)) > 0 && (await resident(fresh)) > 0, 'read or written, the files are in the page cache');
    assert.deepEqual(await dropPageCache(source), ['dd', `if=${source}`, 'iflag=nocache', 'count=0', 'status=none']);
    await dropPageCache(fresh);
    assert.deepEqual([await resident(source), await resident(fresh)], [0, 0]);
  });
});
