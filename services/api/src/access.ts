import type { Agent, FieldError, JobSpec } from '@niclab/shared/domain/contract';
import { campaignOf } from '@niclab/shared/domain/campaigns/index';
import { paramsAt, repetitions, sweepPoints } from '@niclab/shared/domain/plan';
import { runSeconds } from '@niclab/shared/domain/flow-tests';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import { udpBitsPerSecond } from '@niclab/shared/domain/udp-rate';
import type { RequestCounts } from '@niclab/shared/stores/request-stores';
import { authenticate, includes, SCOPES, type Principal, type Policy, type Scope } from './policy.js';

/** What an operation of openapi.yaml needs (`x-niclab-scope`). */
export type OperationScope = Scope | 'public' | 'metrics';
const OPERATION_SCOPES: readonly OperationScope[] = [...SCOPES, 'public', 'metrics'];

export function isOperationScope(value: unknown): value is OperationScope {
  return OPERATION_SCOPES.some((scope) => scope === value);
}

const ANYONE: Principal = { name: 'anonymous', scope: null, limits: {} };
const WINDOW_MS = 60_000;

/**
 * Lets a request through or throws the problem that says why not: 401 without a known token,
 * 403 without the scope, 429 over the policy's requests per minute (counted in Redis, so
 * every API replica shares the count).
 */
export async function admit(
  deps: { policy: Policy; requestCounts: RequestCounts },
  needed: OperationScope,
  request: { authorization: string | undefined; address: string | undefined },
  now = Date.now(),
): Promise<Principal> {
  const { policy } = deps;
  if (needed === 'public' || (needed === 'metrics' && policy.metrics === 'public')) return ANYONE;
  const principal = authenticate(policy, request.authorization);
  if (principal === null) {
    throw new HttpProblem(401, 'unauthorized', 'This API needs a token: send Authorization: Bearer <token>.', [], { rule: 'token', headers: { 'WWW-Authenticate': 'Bearer realm="niclab"' } });
  }
  if (principal === undefined) {
    throw new HttpProblem(401, 'unauthorized', 'The token is not one this API knows.', [], { rule: 'token', headers: { 'WWW-Authenticate': 'Bearer realm="niclab", error="invalid_token"' } });
  }
  const scope: Scope = needed === 'metrics' ? 'read' : needed;
  if (!includes(principal.scope, scope)) {
    throw new HttpProblem(403, 'forbidden', `This needs the "${scope}" scope; ${principal.name === 'anonymous' ? 'anonymous requests' : `token ${principal.name}`} ${principal.scope ? `only has "${principal.scope}"` : 'has none'}.`, [], { rule: 'scope' });
  }
  if (policy.requestsPerMinute !== null) {
    const window = Math.floor(now / WINDOW_MS);
    const caller = principal.name === 'anonymous' ? `ip:${request.address ?? 'unknown'}` : principal.name;
    const count = await deps.requestCounts.count(caller, window, WINDOW_MS);
    if (count > policy.requestsPerMinute) {
      const retryAfter = Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - now) / 1000));
      throw new HttpProblem(429, 'rate-limited', `More than ${policy.requestsPerMinute} requests this minute; try again in ${retryAfter} s.`, [], { rule: 'requestsPerMinute', headers: { 'Retry-After': String(retryAfter) } });
    }
  }
  return principal;
}

/** Whether a principal may act on something another principal owns (its job, its schedule). */
export function mayManage(principal: Principal, owner: string): boolean {
  return principal.name === owner || includes(principal.scope, 'admin');
}

function limitError(field: string, rule: string, message: string): HttpProblem {
  return new HttpProblem(422, 'limit', `The job asks for more than token limits allow (${rule}).`, [{ field, message }], { rule });
}

/**
 * Checks a spec against the principal's limits; throws 422 (a size over a limit) or 403 (an
 * agent or interface the token may not use) naming the rule. How many jobs a token may have
 * at once is checked as the job is created (`JobStore.createWithin`).
 */
export function checkLimits(
  spec: JobSpec,
  principal: Principal,
  deps: { agents: Agent[] },
  /** Where the spec sits in the request, for the fields errors name (`body.spec` in a schedule). */
  root = 'body',
): void {
  const limits = principal.limits;
  if ((spec.tuning || spec.sweep?.mtu) && !includes(principal.scope, 'admin')) {
    const field = spec.tuning ? `${root}.tuning` : `${root}.sweep.mtu`;
    throw new HttpProblem(403, 'forbidden', 'Tuning changes lab hosts; it needs the "admin" scope.', [{ field, message: 'needs the "admin" scope' }], { rule: 'scope' });
  }
  // An engine's parameters depend on the sweep point only: check each point once, not each run.
  const points = sweepPoints(spec);
  // A campaign may give a run more than `duration` (an MLRsearch's final trials): its longest run is held to the limit.
  const longest = runSeconds({ ...spec, duration: campaignOf(spec).longestRun(spec) });
  if (limits.maxDurationSeconds !== undefined && longest > limits.maxDurationSeconds) {
    const trial = longest > runSeconds(spec);
    throw limitError(trial ? `${root}.search.goals` : `${root}.duration`, 'maxDurationSeconds', `${longest} s${trial ? ' (its longest trial)' : ''}${spec.idleBaseline ? ' (with the idle baseline)' : ''} is over the limit of ${limits.maxDurationSeconds} s`);
  }
  const { runs, by } = campaignOf(spec).maxRuns(spec);
  if (limits.maxRunsPerJob !== undefined && runs > limits.maxRunsPerJob) {
    const what = by === 'pairs' ? `its group expands to ${spec.flows.length} pairs, ` : '';
    throw limitError(by === 'pairs' ? `${root}.flows` : `${root}.repeat`, 'maxRunsPerJob', `${what}the job makes up to ${runs} runs; the limit is ${limits.maxRunsPerJob}`);
  }
  for (const point of points) {
    const params = paramsAt(spec, point);
    // A flow's own test may set its own streams: each flow is held to the limit.
    spec.flows.forEach((flow, i) => {
      const streams = paramsAt(spec, point, i).streams;
      if (limits.maxStreams === undefined || streams <= limits.maxStreams) return;
      const field = flow.test?.streams !== undefined ? `${root}.flows[${i}].test.streams` : point.streams !== undefined ? `${root}.sweep.streams` : `${root}.streams`;
      throw limitError(field, 'maxStreams', `${streams} streams is over the limit of ${limits.maxStreams}`);
    });
    if (limits.maxUdpBitsPerSecond !== undefined && params.udp) {
      const bits = udpBitsPerSecond(params.udp);
      if (bits > limits.maxUdpBitsPerSecond) {
        throw limitError(point.rate !== undefined ? `${root}.sweep.rate` : `${root}.udp.rate`, 'maxUdpBitsPerSecond', `${bits} bit/s is over the limit of ${limits.maxUdpBitsPerSecond} bit/s`);
      }
    }
  }
  const denied: FieldError[] = [];
  const byId = new Map(deps.agents.map((agent) => [agent.id, agent]));
  spec.flows.forEach((flow, i) => {
    for (const side of ['from', 'to'] as const) {
      const { agent: id, interface: name } = flow[side];
      const labels = byId.get(id)?.labels ?? {};
      const mismatch = Object.entries(limits.agentLabels ?? {}).find(([key, value]) => labels[key] !== value);
      if (mismatch) denied.push({ field: `${root}.flows[${i}].${side}.agent`, message: `agent "${id}" does not have the label ${mismatch[0]}=${mismatch[1]} this token is limited to` });
      else if (limits.interfaces && !limits.interfaces.includes(name)) denied.push({ field: `${root}.flows[${i}].${side}.interface`, message: `this token may only use interfaces ${limits.interfaces.join(', ')}` });
    }
  });
  if (denied.length > 0) throw new HttpProblem(403, 'forbidden', 'The job uses agents or interfaces this token may not use.', denied, { rule: 'agents' });
}
