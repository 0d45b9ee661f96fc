/** Friendly names for the types generated from openapi.yaml (never hand-copied). */
import type { components } from '../generated/openapi.js';

type S = components['schemas'];
/** A job spec as submitted: its `flows` a list or a group (FlowGroup). */
export type JobRequest = S['JobSpec'];
/** A job spec as stored and run: a group's `flows` already expanded into pairs (`group` records it). */
export type JobSpec = Omit<JobRequest, 'flows'> & { flows: FlowSpec[] };
export type Job = Omit<S['Job'], 'spec'> & { spec: JobSpec };
export type FlowGroup = S['FlowGroup'];
export type GroupMembers = S['GroupMembers'];
export type SkippedMember = S['SkippedMember'];
export type GroupExpansion = S['GroupExpansion'];
export type JobStatus = S['JobStatus'];
export type JobPage = S['JobPage'];
export type Run = S['Run'];
export type RunStatus = S['RunStatus'];
export type SweepPoint = S['SweepPoint'];
export type FlowSpec = S['Flow'];
export type Endpoint = S['Endpoint'];
export type FlowResult = S['FlowResult'];
export type EndFigures = S['EndFigures'];
export type EndDiagnostics = S['EndDiagnostics'];
export type NicDelta = S['NicDelta'];
export type Interval = S['Interval'];
export type UdpFigures = S['UdpFigures'];
export type RrFigures = S['RrFigures'];
export type ProbeFigures = S['ProbeFigures'];
export type ProbePhase = S['ProbePhase'];
export type ProbeParams = S['ProbeParams'];
export type HostCounters = S['HostCounters'];
export type LossAttribution = S['LossAttribution'];
export type FileIo = S['FileIo'];
export type FileStages = S['FileStages'];
export type FileStage = S['FileStage'];
export type DiskRate = S['DiskRate'];
export type Bottleneck = S['Bottleneck'];
export type Verdict = Bottleneck['verdict'];
export type Agent = S['Agent'];
export type AgentInterface = S['Interface'];
export type EngineInfo = S['EngineInfo'];
export type EngineName = S['Engine'];
export type ErrorInfo = S['Error'];
export type Problem = S['Problem'];
export type FieldError = NonNullable<Problem['errors']>[number];

export const TERMINAL_STATUSES: readonly JobStatus[] = ['succeeded', 'failed', 'canceled'];

/** A run's own end: succeeded, failed or canceled (an interrupted run is made again). */
export function isFinished(run: Pick<Run, 'status'>): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(run.status);
}
