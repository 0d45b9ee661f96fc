import { createHash } from 'node:crypto';
import type { Engine, EngineOutcome } from '../engine.js';
import { runNodeChild, siblingScript } from '../child.js';
import type { TcpChildInput, TcpChildResult } from './tcp-ends.js';
import type { UdpChildInput, UdpChildResult } from './udp-child.js';
import type { ProbeChildInput } from './probe-child.js';
import type { Measured } from '@niclab/shared/domain/test-kinds/measured';
import { RUNNERS, type RunnerScript } from './runners.js';
import { tcpSocketBufferSupport } from './sockopt.js';

// Resolved per run, so useBuiltEngineChildren() after this module has loaded still counts.
const scriptFor = (name: RunnerScript) => siblingScript(import.meta.url, name);

/**
 * nttcp-style TCP, netperf TCP_RR-style request/response, rude/crude-style constant-rate UDP
 * and an irtt-style UDP latency probe written in TypeScript; each end runs in its own process so its CPU time is its own.
 */
export const builtinEngine: Engine = {
  name: 'builtin',

  async capabilities() {
    // TCP socket buffers go through koffi (setsockopt on the socket's fd), which this host may lack.
    const tcpSocketBuffer = tcpSocketBufferSupport();
    return { available: true, version: `niclab builtin (node ${process.version})`, ...(tcpSocketBuffer ? { unsupported: { tcpSocketBuffer } } : {}) };
  },

  async run(task, context): Promise<EngineOutcome> {
    const script = scriptFor(RUNNERS[task.params.test](task.params));
    // Both ends of a leg derive the same token, so a receiver ignores datagrams not of its leg.
    const token = createHash('sha256').update(`${task.runId}/${task.leg}`).digest().readUInt32BE(0);
    const input: TcpChildInput | UdpChildInput | ProbeChildInput = { role: task.role, params: task.params, address: context.address, token, ...(context.file ? { file: context.file } : {}) };
    if (task.role === 'sender') {
      input.peer = task.peer;
      input.startAt = task.startAt;
    }
    let port: number | null = task.role === 'sender' ? task.peer.port : null;
    const outcome = await runNodeChild<TcpChildResult & Partial<UdpChildResult> & { measured?: Measured }>(script, input, context.signal, {
      ready: (listening) => {
        port = listening;
        context.ready(listening);
      },
      armed: context.armed,
      spawned: context.spawned,
      interval: context.interval,
    });
    return {
      figures: outcome.result?.figures ?? null,
      intervals: outcome.result?.intervals ?? [],
      error: outcome.error,
      command: outcome.argv,
      port,
      udp: outcome.result?.udp ?? null,
      measured: outcome.result?.measured ?? null,
      retransmits: outcome.result?.retransmits ?? null,
      socketBuffers: outcome.result?.socketBuffers,
      ...(outcome.result?.tcpTimes ? { tcpTimes: outcome.result.tcpTimes } : {}),
    };
  },
};
