import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import type { Agent, FieldError, Job, JobRequest, JobSpec } from '@niclab/shared/domain/contract';
import { expandSpec } from '@niclab/shared/domain/groups';
import { canRun } from '@niclab/shared/domain/engine-rules';
import { flowSpec, flowTestErrors, withFlowTestDefaults } from '@niclab/shared/domain/flow-tests';
import { bindAddress, isUsable } from '@niclab/shared/domain/interfaces';
import type { JobStore } from '@niclab/shared/stores/job-store';
import { enqueueJob, type JobMessage } from '@niclab/shared/stores/job-queue';
import type { Logger } from '@niclab/shared/runtime/logger';
import { campaignOf, strategyFor } from '@niclab/shared/domain/campaigns/index';
import { intervalOf, runSpec } from '@niclab/shared/domain/plan';
import { CONFIDENCE } from '@niclab/shared/domain/statistics';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import { kindOf } from '@niclab/shared/domain/test-kinds/index';
import { jobTuningErrors } from '@niclab/shared/domain/tuning-rules';
import { tunedEnds, tuningConflicts, type Role } from '@niclab/shared/domain/end-tuning';
import { withFileDefaults } from '@niclab/shared/domain/file-io/spec';
import { fileInventoryErrors } from '@niclab/shared/domain/file-io/inventory';
import { checkLimits } from './access.js';
import type { Principal } from './policy.js';

/** A job may expand to at most this many runs. */
export const MAX_RUNS = 10_000;

/** Each error once (the same conflict at every point of a sweep is one). */
const unique = (errors: FieldError[]) => [...new Map(errors.map((e) => [`${e.field}\u0000${e.message}`, e])).values()];

/** What the schema cannot say about a spec: combinations that do not make sense. */
function consistency(spec: JobSpec): FieldError[] {
  const errors: FieldError[] = [];
  if (spec.protocol === 'tcp' && spec.udp) errors.push({ field: 'body.udp', message: 'applies to protocol "udp" only' });
  for (const dimension of ['packetSize', 'rate'] as const) {
    if (spec.sweep?.[dimension] && spec.protocol !== 'udp') errors.push({ field: `body.sweep.${dimension}`, message: 'applies to protocol "udp" only' });
  }
  errors.push(...kindOf(spec).specErrors(spec), ...flowTestErrors(spec));
  if (typeof spec.repeat === 'object' && spec.repeat.min > spec.repeat.max) errors.push({ field: 'body.repeat.min', message: `must not exceed max (${spec.repeat.max})` });
  if (spec.tuning) errors.push(...jobTuningErrors(spec.tuning, 'body.tuning'));
  if (spec.interval !== undefined && spec.interval > spec.duration) errors.push({ field: 'body.interval', message: `must not exceed duration (${spec.duration} s)` });
  const campaign = campaignOf(spec);
  errors.push(...campaign.specErrors(spec));
  const { runs, by } = campaign.maxRuns(spec);
  if (runs > MAX_RUNS) errors.push({ field: by === 'pairs' ? 'body.flows' : 'body.sweep', message: `expands to ${runs} runs${by === 'pairs' ? ` (${spec.flows.length} pairs)` : ''}; at most ${MAX_RUNS} are allowed per job` });
  // Each kind of run the campaign makes, once: no host or interface of it may need two tunings at once.
  else if (spec.tuning) errors.push(...unique(campaign.runShapes(spec).flatMap((shape) => tuningConflicts(runSpec(spec, shape), shape.point))));
  return errors;
}

/** Every endpoint must name an online agent and one of its interfaces that is up and has an address. */
function inventory(spec: JobSpec, agents: Map<string, Agent>): FieldError[] {
  const errors: FieldError[] = [];
  spec.flows.forEach((flow, i) => {
    for (const side of ['from', 'to'] as const) {
      const { agent: agentId, interface: name } = flow[side];
      const field = `body.flows[${i}].${side}`;
      const agent = agents.get(agentId);
      if (!agent) {
        errors.push({ field: `${field}.agent`, message: `agent "${agentId}" is not registered` });
        continue;
      }
      if (!agent.online) {
        errors.push({ field: `${field}.agent`, message: `agent "${agentId}" is offline (last seen ${agent.lastSeen})` });
        continue;
      }
      const iface = agent.interfaces.find((candidate) => candidate.name === name);
      if (!iface) errors.push({ field: `${field}.interface`, message: `agent "${agentId}" has no interface "${name}"` });
      else if (!isUsable(iface)) errors.push({ field: `${field}.interface`, message: `interface "${name}" on agent "${agentId}" is ${iface.operstate}` });
      else if (!bindAddress(iface)) errors.push({ field: `${field}.interface`, message: `interface "${name}" on agent "${agentId}" has no address` });
    }
  });
  return errors;
}

/**
 * The field that set an end's MTU: the swept value, else its role's block when that block's MTU
 * is the one in force (a factorial cell that leaves the role untuned keeps the shorthand's),
 * else the shorthand.
 */
function mtuField(spec: JobSpec, role: Role, mtu: number): string {
  const swept = spec.sweep?.mtu?.indexOf(mtu) ?? -1;
  if (swept >= 0) return `body.sweep.mtu[${swept}]`;
  return spec.tuning?.[role]?.mtu === mtu ? `body.tuning.${role}.mtu` : 'body.tuning.mtu';
}

/**
 * An MTU an end would set outside the range its interface's driver takes (the agent reports
 * min_mtu and max_mtu): refused now, naming the field, rather than a run that fails when `ip link
 * set` is refused. Interfaces whose range is not known are left to the run.
 */
function mtuRangeErrors(spec: JobSpec, agents: Map<string, Agent>): FieldError[] {
  if (!spec.tuning && !spec.sweep?.mtu) return [];
  const errors: FieldError[] = [];
  for (const shape of campaignOf(spec).runShapes(spec)) {
    for (const end of tunedEnds(runSpec(spec, shape), shape.point)) {
      const mtu = end.tuning?.mtu;
      const range = agents.get(end.agent)?.interfaces.find((i) => i.name === end.interface)?.mtuRange;
      if (mtu === undefined || !range || (mtu >= range.min && mtu <= range.max)) continue;
      errors.push({ field: mtuField(spec, end.role, mtu), message: `${end.agent}:${end.interface} takes an MTU of ${range.min} to ${range.max} (its driver's min_mtu and max_mtu), not ${mtu}` });
    }
  }
  return unique(errors);
}

/** Defaults the schema cannot state (they depend on other fields), filled in so the stored job shows them. */
export function withDefaults(spec: JobSpec): JobSpec {
  const filled = { ...spec };
  filled.interval = intervalOf(filled);
  if (typeof filled.repeat === 'object') filled.repeat = { confidence: CONFIDENCE, halfWidthPercent: 2.5, ...filled.repeat };
  return withFileDefaults(withFlowTestDefaults(kindOf(filled).withDefaults(filled)));
}

/** Every reason the spec cannot be accepted: its own consistency, the live inventory, the engine. */
export function submissionErrors(spec: JobSpec, registered: Agent[]): FieldError[] {
  const errors = consistency(spec);
  const agents = new Map(registered.map((agent) => [agent.id, agent]));
  errors.push(...inventory(spec, agents), ...fileInventoryErrors(spec, agents), ...mtuRangeErrors(spec, agents));
  // Each flow runs its own test with its own engine on its own agents.
  const reasons = new Map<string, string>();
  spec.flows.forEach((flow, i) => {
    const involved = [...new Set([flow.from.agent, flow.to.agent])].map((id) => agents.get(id)).filter((a): a is Agent => !!a?.online);
    for (const message of canRun(flowSpec(spec, i), involved)) if (!reasons.has(message)) reasons.set(message, flow.test ? `body.flows[${i}].test` : 'body.engine');
  });
  errors.push(...[...reasons].map(([message, field]) => ({ field, message })));
  return errors;
}

/** What submitting a job needs: the stores it reads and writes, the queue coordinators take jobs from. */
export interface SubmitDeps {
  store: JobStore;
  agents: AgentRegistry;
  jobsQueue: Queue<JobMessage>;
  log: Logger;
}

/**
 * Validates a spec against the principal's limits and the live inventory and, when it can run,
 * stores it and queues it for a coordinator. The one way a job comes to be: the API's
 * submissions (a broken limit throws its 403/422) and schedules' firings (`firing`: a group is
 * expanded and checked against the owner's limits at each firing, and a broken limit comes
 * back as `limit` for a failed job that says why; the skip rule, not maxConcurrentJobs, keeps
 * a schedule to one job at a time).
 */
export async function submitJob(
  services: SubmitDeps,
  input: JobRequest,
  owner: { principal: Principal; firing?: boolean; id?: string },
): Promise<{ job: Job } | { errors: FieldError[]; spec: JobSpec; expansion?: Job['expansion']; limit?: string }> {
  const { store, agents, jobsQueue, log } = services;
  // The agents the flows name, not the fleet: every submission read every agent's record (all
  // of a 1,000-agent fleet's, ~1.5 MB of JSON) before. A group chooses its members from them all.
  const registered = Array.isArray(input.flows) ? await agents.some(input.flows.flatMap((flow) => [flow.from.agent, flow.to.agent])) : await agents.list();
  // A group is expanded against the inventory now: members offline or unmatched are skipped.
  const expanded = expandSpec(input, registered);
  let spec = withDefaults(expanded.spec);
  const { expansion } = expanded;
  const { principal, firing = false } = owner;
  try {
    checkLimits(spec, principal, { agents: registered });
  } catch (error) {
    if (!firing || !(error instanceof HttpProblem)) throw error;
    return { errors: error.errors, spec, expansion, limit: error.extra.rule ?? 'limit' };
  }
  const errors = [...expanded.errors, ...submissionErrors(spec, registered)];
  if (errors.length === 0) {
    // The campaign's defaults that depend on the inventory (a search's max: the senders' link speed).
    const defaulted = campaignOf(spec).withDefaults(spec, registered);
    spec = defaulted.spec;
    errors.push(...defaulted.errors);
  }
  if (errors.length > 0) return { errors, spec, expansion };
  // An Idempotency-Key names the job's id before it is made (api/idempotency.ts).
  const id = owner.id ?? randomUUID();
  const ownerName = principal.name;
  const maxActive = firing ? undefined : principal.limits.maxConcurrentJobs;
  const job = await store.createWithin(id, spec, { runsTotal: strategyFor(spec).expectedRuns(new Map()), owner: ownerName, maxActive, expansion });
  if ('active' in job) {
    throw new HttpProblem(403, 'forbidden', `Token ${ownerName} has ${job.active} jobs queued or running; its limit is ${maxActive}.`, [], { rule: 'maxConcurrentJobs' });
  }
  try {
    // A coordinator that fails on an unexpected error (Redis gone for longer than its patience)
    // leaves the job to be taken again; processJob resumes it, keeping finished runs.
    await enqueueJob(jobsQueue, id);
  } catch (error) {
    await store.transition(id, ['queued'], 'failed', { finishedAt: new Date().toISOString(), error: { code: 'enqueue_failed', message: 'the job could not be queued' } }).catch(() => undefined);
    throw error;
  }
  log.info({ jobId: id, owner: ownerName, engine: spec.engine, flows: spec.flows.length, ...(expansion ? { rounds: expansion.rounds.length, skipped: expansion.skipped.map((s) => `${s.agent}: ${s.reason}`) } : {}), runs: job.progress.runsTotal, schedule: spec.labels?.schedule }, 'job accepted');
  return { job };
}
