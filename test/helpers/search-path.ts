import assert from 'node:assert/strict';
import { strategyFor } from '@niclab/shared/domain/campaigns/index';
import type { JobSpec, Run } from '@niclab/shared/domain/contract';
import type { PlannedRun } from '@niclab/shared/domain/plan';

/**
 * A search driven as the coordinator drives it (strategy.next until null) against a simulated
 * path: each trial's figures are a function of its offered rate, so every result has a closed
 * form. Either algorithm: a binary search's trials last the job's duration, an MLRsearch's
 * their own.
 */
/** Per flow: the share of datagrams lost at an offered rate, what the sender manages, whether the run fails, the receiver's socket drops; a probe's round trip beside it (latency runs). */
export interface PathFigures { lossRatio: number; achieved?: number; error?: boolean; socketDrops?: number; rttSeconds?: number }
export type Path = (offered: number, duration: number, trial: number) => PathFigures;

/** A probe's figures whose every round trip is `rtt` s (one-way half of it each way), none lost. */
function probeOf(rtt: number, duration: number) {
  const summary = { min: rtt, mean: rtt, p50: rtt, p90: rtt, p99: rtt, max: rtt };
  const half = { min: rtt / 2, mean: rtt / 2, p50: rtt / 2, p90: rtt / 2, p99: rtt / 2, max: rtt / 2 };
  const sent = Math.round(duration * 100);
  return {
    intervalSeconds: 0.01, packetSize: 64, clock: 'shared',
    loaded: { seconds: duration, sent, reflected: sent, received: sent, lost: { forward: 0, return: 0, total: 0 }, lossRatio: { forward: 0, return: 0, total: 0 }, duplicates: 0, outOfOrder: 0, rttSeconds: summary, oneWayDelaySeconds: { forward: half, return: half }, ipdvSeconds: { roundTrip: summary, forward: half, return: half } },
  };
}

/** A trial's run: `duration` s at its offered rate (an MLRsearch trial's own, else the job's); a latency run adds a probe flow beside each. */
export function runOf(plan: PlannedRun, figures: PathFigures, flows = 1, duration = plan.duration ?? 1): Run {
  const offered = (plan.point.rate as { packetsPerSecond: number }).packetsPerSecond;
  const sent = Math.round((figures.achieved ?? offered) * duration);
  const lost = Math.round(sent * figures.lossRatio);
  const udp = { sent, received: sent - lost, lost, lossRatio: sent ? lost / sent : 0, outOfOrder: 0, duplicates: 0, jitterSeconds: 0, achievedPacketsPerSecond: sent / duration };
  const lossAttribution = { receiverSocketBuffer: figures.socketDrops ?? 0 };
  return {
    id: `r${plan.index}`, jobId: 'j', index: plan.index, point: plan.point, repetition: plan.repetition, duration,
    ...(plan.latencyAt !== undefined ? { latencyAt: plan.latencyAt } : {}),
    status: figures.error ? 'failed' : 'succeeded', startedAt: null, finishedAt: null,
    error: figures.error ? { code: 'agent_lost', message: 'lost' } : null,
    flows: figures.error ? [] : [
      ...Array.from({ length: flows }, (_, flowIndex) => ({ flowIndex, udp, lossAttribution, diagnostics: {} })),
      ...(plan.latencyAt === undefined ? [] : Array.from({ length: flows }, (_, i) => ({ flowIndex: flows + i, udp: null, probe: probeOf(figures.rttSeconds ?? 0, duration), diagnostics: {} }))),
    ],
  } as unknown as Run;
}

/** Drives the strategy to its end, as processJob does; returns the plans and the runs in order. */
export function drive(job: JobSpec, path: Path, limit = 400): { plans: PlannedRun[]; runs: Run[] } {
  const strategy = strategyFor(job);
  const finished = new Map<number, Run>();
  const plans: PlannedRun[] = [];
  for (let plan = strategy.next(finished); plan; plan = strategy.next(finished)) {
    assert.ok(plans.length < limit, 'the search ends');
    assert.equal(finished.has(plan.index), false, 'a new index for every trial');
    plans.push(plan);
    const duration = plan.duration ?? job.duration;
    finished.set(plan.index, runOf(plan, path((plan.point.rate as { packetsPerSecond: number }).packetsPerSecond, duration, plans.length), job.flows.length, duration));
  }
  return { plans, runs: [...finished.values()] };
}

