/**
 * The builtin engine's UDP latency probe (irtt-like): one end of one leg. The sender sends one
 * datagram every `interval` ms on absolute slots (start + i x interval, so the schedule never
 * drifts), the receiver reflects each one with its own receive and send times. Times are
 * CLOCK_MONOTONIC (process.hrtime), which every process on one kernel boot reads alike, network
 * namespaces included: the coordinator keeps one-way delays only when the two ends' boot ids match.
 * Arrivals are the kernel's timestamps (probe-socket.ts), so neither end's wake-up is in a round trip.
 */
import { readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { endFigures } from '@niclab/shared/domain/figures';
import { probePhase, rttIncrease, type ProbeSample, type ReflectorCounts } from '@niclab/shared/domain/test-kinds/probe/stats';
import { rttSummary } from '@niclab/shared/domain/figures';
import type { EndFigures, Interval, ProbeFigures } from '@niclab/shared/domain/contract';
import type { ProbeMeasured } from '@niclab/shared/domain/test-kinds/probe/measured';
import type { UdpChildInput } from './udp-child.js';
import { cpuSeconds, NO_CPU, serveChild, type Send } from './child-main.js';
import { EngineFailure } from '../child-protocol.js';
import { parseSnmp } from '../../host-counters.js';
import { openProbeSocket } from './probe-socket.js';

/** As a UDP stream's: a reflector answers only datagrams that carry its leg's token. */
export type ProbeChildInput = UdpChildInput;

export interface ProbeChildResult {
  figures: EndFigures;
  intervals: Interval[];
  /** The sending end's figures, or what the far end reflected. */
  measured: ProbeMeasured;
}

/** magic, token, sequence, flags (+3 spare), sent, reflector received, reflector sent: 40 bytes. */
export const PROBE_HEADER_BYTES = 40;
const MAGIC = 0x4e4c5052; // "NLPR"
const FIN = 0xffffffff;
const IDLE = 1;
const REFLECTED = 2;

const now = () => process.hrtime.bigint();
const ms = (ns: bigint) => Number(ns) / 1e6;

/** This network namespace's Udp RcvbufErrors (null where /proc/net/snmp cannot be read). */
function rcvbufErrors(): number | null {
  try {
    const value = parseSnmp(readFileSync('/proc/net/snmp', 'utf8'), 'Udp', ['RcvbufErrors']).RcvbufErrors;
    return typeof value === 'number' && Number.isFinite(value) ? value : null;
  } catch {
    return null;
  }
}
const delta = (before: number | null, after: number | null) => (before === null || after === null ? null : after - before);

/** Reflects every datagram of its leg until the sender's FIN (or the run's end), counting each phase. */
async function reflect(input: ProbeChildInput, send: Send): Promise<ProbeChildResult> {
  const { packetSize, interval } = input.params.probe!;
  const slots = Math.round((input.params.duration * 1000) / interval);
  const seen = new Uint8Array(Math.ceil(slots / 8) + 1);
  const counts: Record<'loaded' | 'idle', ReflectorCounts> = { loaded: { reflected: 0, duplicates: 0 }, idle: { reflected: 0, duplicates: 0 } };
  const drops0 = rcvbufErrors();
  const socket = await openProbeSocket(input.address, Math.max(packetSize, PROBE_HEADER_BYTES));
  return new Promise((resolve, reject) => {
    let firstAt = 0;
    let lastAt = 0;
    let cpu: NodeJS.CpuUsage | undefined;
    let giveUp: NodeJS.Timeout | undefined;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(giveUp);
      clearTimeout(nothing);
      socket.close();
      const failure = socket.failure();
      if (failure) return reject(failure);
      const received = counts.loaded.reflected + counts.idle.reflected;
      resolve({
        figures: endFigures(received * packetSize, firstAt ? (lastAt - firstAt) / 1000 : 0, cpu ? cpuSeconds(cpu) : NO_CPU, received, false),
        intervals: [],
        measured: { reflector: { loaded: counts.loaded, ...(input.params.idleSeconds ? { idle: counts.idle } : {}), rcvbufErrors: delta(drops0, rcvbufErrors()), arrivalTimes: socket.arrivalTimes() } },
      });
    };
    // A sender that never came: stop when it must have finished.
    const nothing = setTimeout(finish, (input.params.duration + 10) * 1000);
    socket.onDatagram((data, at, from) => {
      if (finished || data.length < PROBE_HEADER_BYTES || data.readUInt32BE(0) !== MAGIC || data.readUInt32BE(4) !== input.token) return;
      const seq = data.readUInt32BE(8);
      if (seq === FIN) return finish();
      if (seq >= slots) return;
      if (firstAt === 0) {
        firstAt = performance.now();
        cpu = process.cpuUsage();
        // The sender came: from now its own end bounds the wait, not this end's start (a long setup
        // before the run's start would otherwise cut its last slots off as lost).
        clearTimeout(nothing);
        // Its FINs can all be lost: stop a little after the sender must have.
        giveUp = setTimeout(finish, (input.params.duration + 5) * 1000);
      }
      lastAt = performance.now();
      const phase = counts[data[12]! & IDLE ? 'idle' : 'loaded'];
      const bit = 1 << (seq & 7);
      if (seen[seq >>> 3]! & bit) phase.duplicates += 1;
      else {
        seen[seq >>> 3]! |= bit;
        phase.reflected += 1;
      }
      data[12] = data[12]! | REFLECTED;
      data.writeBigUInt64BE(at, 24);
      // The dwell ends at the send's system call: the time it took this process to wake is dwell, not path.
      socket.send(data, 32, from);
    });
    send({ type: 'ready', port: socket.port() });
  });
}

/** Sends on the slots, takes the reflections, and after the last slot waits for late ones (irtt: 3 x the longest round trip). */
async function probe(input: ProbeChildInput): Promise<ProbeChildResult> {
  const { packetSize, interval } = input.params.probe!;
  // Its sends as the kernel stamps them: the reflector's cannot be (its send time travels in the datagram it stamps).
  const socket = await openProbeSocket(input.address, Math.max(packetSize, PROBE_HEADER_BYTES), true);
  const lateness: number[] = [];
  const seen = { idle: { duplicates: 0, outOfOrder: 0 }, loaded: { duplicates: 0, outOfOrder: 0 } };
  let highest = -1;
  let maxRtt = 0;
  await socket.connect(input.peer!.address, input.peer!.port);
  const drops0 = rcvbufErrors();
  const wait = (input.startAt ?? 0) - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const cpu = process.cpuUsage();
  const t0 = now();
  // Slots and the idle baseline's end are the run's, from its common start: a probe that started
  // late (its process was slow to come up) sends fewer slots, never idle ones under the load.
  const startedAt = Date.now();
  const startLateMs = Math.max(0, startedAt - (input.startAt ?? startedAt));
  const idleMs = Math.max(0, (input.params.idleSeconds ?? 0) * 1000 - startLateMs);
  const slots = Math.max(0, Math.round((input.params.duration * 1000 - startLateMs) / interval));
  const samples: ProbeSample[] = Array.from({ length: slots }, (_, seq) => ({ seq }));
  const sentAt = new BigUint64Array(slots);
  socket.onDatagram((data, at) => {
    if (data.length < PROBE_HEADER_BYTES || data.readUInt32BE(0) !== MAGIC || data.readUInt32BE(4) !== input.token || !(data[12]! & REFLECTED)) return;
    const seq = data.readUInt32BE(8);
    if (seq >= slots) return;
    const sample = samples[seq]!;
    const phase = seen[data[12]! & IDLE ? 'idle' : 'loaded'];
    if (sample.rtt !== undefined) {
      phase.duplicates += 1;
      return;
    }
    const sent = sentAt[seq]!;
    const reflectorIn = data.readBigUInt64BE(24);
    const reflectorOut = data.readBigUInt64BE(32);
    sample.forward = ms(reflectorIn - sent);
    sample.back = ms(at - reflectorOut);
    sample.rtt = ms(at - sent - (reflectorOut - reflectorIn));
    maxRtt = Math.max(maxRtt, sample.rtt);
    if (seq < highest) phase.outOfOrder += 1;
    else highest = seq;
  });
  const payload = Buffer.alloc(packetSize);
  payload.writeUInt32BE(MAGIC, 0);
  payload.writeUInt32BE(input.token, 4);
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      let at = now();
      // Every slot that is due goes now, each with how late it went: a late probe says so, it never skips.
      while (next < slots && ms(at - t0) >= next * interval) {
        const slot = next * interval;
        payload.writeUInt32BE(next, 8);
        payload[12] = slot < idleMs ? IDLE : 0;
        at = socket.send(payload, 16);
        sentAt[next] = at;
        lateness.push(ms(at - t0) - slot);
        next += 1;
      }
      if (next >= slots) return resolve();
      // A timer to the next slot, no spinning: on a busy host a spinning probe is the one the
      // scheduler makes wait (measured: lateness p99 36-40 ms spinning 1.5 ms per slot, 16 ms not).
      setTimeout(tick, Math.max(0, next * interval - ms(now() - t0)));
    };
    tick();
  });
  const lastSentAt = now();
  // Late reflections: irtt waits three times the longest round trip seen; at least 250 ms, at most 5 s.
  await new Promise((r) => setTimeout(r, Math.min(5000, Math.max(250, 3 * maxRtt))));
  const realSeconds = ms(lastSentAt - t0) / 1000;
  const cpuUsed = cpuSeconds(cpu);
  const drops = delta(drops0, rcvbufErrors());
  const fin = Buffer.alloc(PROBE_HEADER_BYTES);
  fin.writeUInt32BE(MAGIC, 0);
  fin.writeUInt32BE(input.token, 4);
  fin.writeUInt32BE(FIN, 8);
  // Several FINs: any one ends the reflector; losing them all only delays it.
  for (let i = 0; i < 3; i++) {
    socket.send(fin, 16);
    await new Promise((r) => setTimeout(r, 10));
  }
  socket.close();
  const failure = socket.failure();
  if (failure) throw failure;
  const idleSlots = Math.min(slots, Math.ceil(idleMs / interval));
  const loaded = probePhase(samples.slice(idleSlots), seen.loaded, (input.params.duration * 1000 - idleMs) / 1000);
  // Nothing back is no figure: a zero round trip would read as the best there is.
  if (loaded.received === 0) throw new EngineFailure('no_data', `none of the probe's ${loaded.sent} datagrams under the load came back`);
  const figures: ProbeFigures = {
    intervalSeconds: interval / 1000,
    packetSize,
    // The coordinator decides from both ends' boot ids; until then only the round trip is sure.
    clock: 'separate',
    arrivalTimes: { sender: socket.arrivalTimes(), reflector: null },
    sendTimes: socket.sendTimes(),
    loaded,
    schedule: { slots, startedAt: new Date(startedAt).toISOString(), startLateSeconds: startLateMs / 1000, latenessSeconds: rttSummary(Float64Array.from(lateness).sort()) },
    socketDrops: { sender: drops, reflector: null },
  };
  const idle = idleSlots > 0 ? probePhase(samples.slice(0, idleSlots), seen.idle, idleMs / 1000) : null;
  // An idle phase with nothing back (every slot lost, or a probe that came up after it) has no round trip to stand beside the load's.
  if (idle && idle.received > 0) {
    figures.idle = idle;
    figures.rttIncreaseSeconds = rttIncrease(loaded, idle);
  }
  return { figures: endFigures(slots * packetSize, realSeconds, cpuUsed, slots, false), intervals: [], measured: { probe: figures } };
}

/**
 * A probe's own wake-up delay is measurement error, so it asks to run ahead of the load it
 * measures (nice -10; an agent that may not raise priority keeps its own). It sleeps between
 * slots and takes little CPU, so it never starves the flows beside it.
 */
function raisePriority(): void {
  try {
    setPriority(-10);
  } catch {
    // Not permitted: the schedule's lateness then shows what the host's load cost.
  }
}

raisePriority();
serveChild<ProbeChildInput>((input, send) => (input.role === 'receiver' ? reflect(input, send) : probe(input)));
