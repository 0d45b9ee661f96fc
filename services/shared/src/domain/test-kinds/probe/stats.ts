/**
 * The UDP latency probe's statistics, from what each end saw: round trips, one-way delays,
 * loss per direction and IPDV (irtt's jitter). Pure, so each figure is checked on its own.
 */
import type { ProbeFigures, ProbePhase } from '../../contract.js';
import { rttSummary } from '../../figures.js';

/** One datagram the probe sent, in milliseconds; the three delays only when its reflection came back. */
export interface ProbeSample {
  seq: number;
  /** Round trip less the far end's dwell (receive to reflect). */
  rtt?: number;
  /** Sent to received by the far end: only meaningful when both ends read one clock. */
  forward?: number;
  /** Reflected by the far end to received back. */
  back?: number;
}

/** What the far end counted of one phase: distinct datagrams it received (and reflected), copies it saw. */
export interface ReflectorCounts {
  reflected: number;
  duplicates: number;
}

const summary = (ms: number[]) => rttSummary(Float64Array.from(ms).sort());

/** |d(i) - d(i-1)| over consecutive sequence numbers that both have a delay (irtt's IPDV). */
export function ipdv(samples: ProbeSample[], delay: (s: ProbeSample) => number | undefined): number[] {
  const bySeq = [...samples].sort((a, b) => a.seq - b.seq);
  const out: number[] = [];
  for (let i = 1; i < bySeq.length; i++) {
    const a = bySeq[i - 1]!;
    const b = bySeq[i]!;
    const da = delay(a);
    const db = delay(b);
    if (b.seq === a.seq + 1 && da !== undefined && db !== undefined) out.push(Math.abs(db - da));
  }
  return out;
}

/** One phase's figures as the sending end saw them: the far end's counts (loss per direction) come in withReflector. */
export function probePhase(samples: ProbeSample[], seen: { duplicates: number; outOfOrder: number }, seconds: number): ProbePhase {
  const back = samples.filter((s) => s.rtt !== undefined);
  const sent = samples.length;
  const received = back.length;
  return {
    seconds,
    sent,
    reflected: null,
    received,
    lost: { forward: null, return: null, total: sent - received },
    lossRatio: { forward: null, return: null, total: sent > 0 ? (sent - received) / sent : 0 },
    duplicates: seen.duplicates,
    outOfOrder: seen.outOfOrder,
    rttSeconds: summary(back.map((s) => s.rtt!)),
    oneWayDelaySeconds: { forward: summary(back.map((s) => s.forward!)), return: summary(back.map((s) => s.back!)) },
    ipdvSeconds: {
      roundTrip: summary(ipdv(samples, (s) => s.rtt)),
      forward: summary(ipdv(samples, (s) => s.forward)),
      return: summary(ipdv(samples, (s) => s.back)),
    },
  };
}

/** Loaded minus idle round trip, per percentile. */
export function rttIncrease(loaded: ProbePhase, idle: ProbePhase): NonNullable<ProbeFigures['rttIncreaseSeconds']> {
  return { p50: loaded.rttSeconds.p50 - idle.rttSeconds.p50, p90: loaded.rttSeconds.p90 - idle.rttSeconds.p90, p99: loaded.rttSeconds.p99 - idle.rttSeconds.p99 };
}

/**
 * The sender's figures completed with the far end's counts, and its one-way delays kept only
 * when both ends read one clock (else they would carry the clocks' offset).
 */
export function withReflector(figures: ProbeFigures, reflector: { loaded: ReflectorCounts; idle?: ReflectorCounts } | null, sharedClock: boolean): ProbeFigures {
  const complete = (phase: ProbePhase, counts: ReflectorCounts | undefined): ProbePhase => {
    const { oneWayDelaySeconds, ...rest } = phase;
    // The far end cannot have reflected fewer than came back, nor more than were sent (a stray copy).
    const reflected = counts ? Math.min(phase.sent, Math.max(phase.received, counts.reflected)) : null;
    const lostForward = reflected === null ? null : phase.sent - reflected;
    const lostReturn = reflected === null ? null : reflected - phase.received;
    const done: ProbePhase = {
      ...rest,
      reflected,
      lost: { ...phase.lost, forward: lostForward, return: lostReturn },
      lossRatio: {
        ...phase.lossRatio,
        forward: lostForward === null ? null : phase.sent > 0 ? lostForward / phase.sent : 0,
        return: lostReturn === null || reflected === null ? null : reflected > 0 ? lostReturn / reflected : 0,
      },
      duplicates: phase.duplicates + (counts?.duplicates ?? 0),
    };
    if (sharedClock && oneWayDelaySeconds) done.oneWayDelaySeconds = oneWayDelaySeconds;
    return done;
  };
  const out: ProbeFigures = { ...figures, clock: sharedClock ? 'shared' : 'separate', loaded: complete(figures.loaded, reflector?.loaded) };
  if (figures.idle) out.idle = complete(figures.idle, reflector?.idle);
  return out;
}
