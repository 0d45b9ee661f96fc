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
/** Per flow: the share of datagrams lost at an offered rate, what the sender manages, whether the run fails, the receiver's socket drops. */
export interface PathFigures { lossRatio: number; achieved?: number; error?: boolean; socketDrops?: number }
export type Path = (offered: number, duration: number, trial: number) => PathFigures;

/** A trial's run: `duration` s at its offered rate (an MLRsearch trial's own, else the job's). */
export function runOf(plan: PlannedRun, figures: PathFigures, flows = 1, duration = plan.duration ?? 1): Run {
  const offered = (plan.point.rate as { packetsPerSecond: number }).packetsPerSecond;
  const sent = Math.round((figures.achieved ?? offered) * duration);
  const lost = Math.round(sent * figures.lossRatio);
  const udp = { sent, received: sent - lost, lost, lossRatio: sent ? lost / sent : 0, outOfOrder: 0, duplicates: 0, jitterSeconds: 0, achievedPacketsPerSecond: sent / duration };
  const lossAttribution = { receiverSocketBuffer: figures.socketDrops ?? 0 };
  return {
    id: `r${plan.index}`, jobId: 'j', index: plan.index, point: plan.point, repetition: plan.repetition, duration,
    status: figures.error ? 'failed' : 'succeeded', startedAt: null, finishedAt: null,
    error: figures.error ? { code: 'agent_lost', message: 'lost' } : null,
    flows: figures.error ? [] : Array.from({ length: flows }, () => ({ udp, lossAttribution, diagnostics: {} })),
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

