/**
 * A flow's own test (`flows[].test`): one run may mix stream flows with rr or probe flows on
 * the same path, all started together, so their round trips are measured under load (flent's
 * RRUL). Everything that plans, checks or reports a flow asks for the spec as that flow sees it.
 */
import type { FieldError, JobSpec } from './contract.js';
import { kindOf, TEST_KINDS } from './test-kinds/index.js';

/** The job's spec as flow `flowIndex` runs it: its own test kind, engine and parameters over the job's. */
export function flowSpec(spec: JobSpec, flowIndex: number): JobSpec {
  const own = spec.flows[flowIndex]?.test;
  if (!own) return spec;
  // The flow's own values (its kind's block among them) over the job's; the kind then drops the others' blocks.
  const { kind, ...params } = own;
  const mixed: JobSpec = { ...spec, ...params, test: kind };
  const test = TEST_KINDS[kind];
  return test.withDefaults(test.ownFields(mixed));
}

/** Every flow's spec, in flow order. */
export function flowSpecs(spec: JobSpec): JobSpec[] {
  return spec.flows.map((_, i) => flowSpec(spec, i));
}

/** True when flow `flowIndex` measures the job's own test (its headline figure sums over these flows only). */
export function measuresHeadline(spec: JobSpec, flowIndex: number): boolean {
  return kindOf(flowSpec(spec, flowIndex)) === kindOf(spec);
}

/** Seconds a flow waits after the run's start: the idle baseline for a flow that loads the path, else none. */
export function startDelaySeconds(spec: JobSpec, flowIndex: number): number {
  return spec.idleBaseline && !kindOf(flowSpec(spec, flowIndex)).latency ? spec.idleBaseline : 0;
}

/** Seconds a run lasts: the load's duration, after the idle baseline if any. */
export function runSeconds(spec: Pick<JobSpec, 'duration' | 'idleBaseline'>): number {
  return spec.duration + (spec.idleBaseline ?? 0);
}

/** What the schema cannot say about flows' own tests: rules against the job's fields. */
export function flowTestErrors(spec: JobSpec): FieldError[] {
  const errors: FieldError[] = [];
  spec.flows.forEach((flow, i) => {
    if (!flow.test) return;
    const own = flowSpec(spec, i);
    const kind = kindOf(own);
    errors.push(...kind.specErrors(own).map((e) => ({ ...e, field: e.field.replace(/^body\./, `body.flows[${i}].test.`) })));
  });
  if (spec.idleBaseline !== undefined) {
    const kinds = flowSpecs(spec).map(kindOf);
    if (!kinds.some((k) => k.latency)) errors.push({ field: 'body.idleBaseline', message: 'needs a flow that measures round trips (a flow with test kind "rr" or "probe")' });
    if (kinds.every((k) => k.latency)) errors.push({ field: 'body.idleBaseline', message: 'needs a flow that loads the path (a flow whose test is neither "rr" nor "probe")' });
  }
  return errors;
}

/** A flow's own test with its defaults filled in, so the stored job shows them. */
export function withFlowTestDefaults(spec: JobSpec): JobSpec {
  if (!spec.flows.some((f) => f.test)) return spec;
  return {
    ...spec,
    flows: spec.flows.map((flow, i) => {
      if (!flow.test) return flow;
      const own = flowSpec(spec, i);
      return { ...flow, test: { ...flow.test, ...kindOf(own).ownBlock(own) } };
    }),
  };
}
