/**
 * A trial as MLRsearch asks for it (the draft's Trial Input) and as niclab reports it (Trial
 * Output, with the counters that say whether niclab itself was the limit). A void trial is one
 * niclab limited: it is kept, with why, and never classifies a load.
 */

/** What the search asks the Measurer for next. */
export interface TrialInput {
  /** Trial Load: the intended datagrams per second of each flow. */
  load: number;
  /** Trial Duration, s. */
  duration: number;
  /** A warm-up trial's result is ignored; the initial trials start the search at max load (CSIT). */
  purpose: 'warmup' | 'initial' | 'search';
  /** The goal (index in the config) whose selector chose this trial; null for warm-up and initial trials. */
  goal: number | null;
  /** That goal's target: 0 the coarsest preceding target, `precedingTargets` the goal itself. */
  target: number | null;
  /** 1, or 1 + the void trials already made for this same input. */
  attempt: number;
}

/** One flow's counters over the trial. */
export interface FlowCounts {
  /** Datagrams the sender sent. */
  sent: number;
  /** Datagrams the receiver got (duplicates included: loss is never below 0). */
  received: number;
  /** The receiving host's UdpRcvbufErrors delta over the trial: datagrams its own socket dropped. */
  receiverSocketDrops: number;
  /** Datagrams the sender sent late, in catch-up bursts after a stall (0 where the engine does not say). */
  late: number;
}

/** What the Measurer reports for one trial. */
export interface TrialResult {
  /** The Trial Load it was asked for (TrialInput.load). */
  load: number;
  /** The Trial Duration it was asked for (TrialInput.duration), s. */
  duration: number;
  /** Trial Effective Duration, s (the draft's §4.6.5): what the duration sums add; defaults to `duration`. */
  effectiveDuration?: number;
  /** One entry per flow; empty when the run failed. */
  flows: FlowCounts[];
  /** Set when the run failed: why. */
  error?: string;
}

/** Why a trial is void: niclab, not the path, limited it. */
export type VoidReason =
  | { kind: 'sender_short'; flow: number; achievedLoad: number; intendedLoad: number }
  | { kind: 'sender_late'; lost: number; late: number }
  | { kind: 'receiver_socket_drops'; flow: number; drops: number }
  | { kind: 'error'; message: string };

/** A sender that offered less than this share of the Trial Load over the whole trial did not test it. */
export const SENDER_FLOOR = 0.999;

/** The sender's achieved load over the whole trial: datagrams sent over the Trial Duration, not its rate while sending. */
export const achievedLoad = (trial: TrialResult, flow: FlowCounts) => flow.sent / trial.duration;

/** Why the trial is void; empty when it measured the path. */
export function voidReasons(trial: TrialResult): VoidReason[] {
  if (trial.error !== undefined) return [{ kind: 'error', message: trial.error }];
  if (trial.flows.length === 0) return [{ kind: 'error', message: 'no flow reported' }];
  const reasons: VoidReason[] = [];
  trial.flows.forEach((flow, index) => {
    const achieved = achievedLoad(trial, flow);
    // A datagram of slack: at 100 datagrams/s for 1 s, 99.9% would be all of them.
    if (flow.sent + 1 < trial.load * trial.duration * SENDER_FLOOR) reasons.push({ kind: 'sender_short', flow: index, achievedLoad: achieved, intendedLoad: trial.load });
    if (flow.receiverSocketDrops > 0) reasons.push({ kind: 'receiver_socket_drops', flow: index, drops: flow.receiverSocketDrops });
  });
  // Datagrams sent late went in catch-up bursts that the path's queue held on top of the rate;
  // a loss no larger than their count may be those bursts' and not the path's. Over all flows:
  // one flow's burst can overflow a queue the others share.
  const lost = trialLost(trial);
  const late = trial.flows.reduce((sum, f) => sum + f.late, 0);
  if (lost > 0 && lost <= late) reasons.push({ kind: 'sender_late', lost, late });
  return reasons;
}

/** Datagrams sent and never received, over all flows (a flow's duplicates never make it negative). */
const trialLost = (trial: TrialResult) => trial.flows.reduce((sum, f) => sum + Math.max(0, f.sent - f.received), 0);

/** Trial Loss Ratio (§4.6.2): datagrams lost over datagrams sent, over all flows (the draft's aggregate counts). */
export function trialLossRatio(trial: TrialResult): number {
  const sent = trial.flows.reduce((sum, f) => sum + f.sent, 0);
  return sent > 0 ? trialLost(trial) / sent : 1;
}

export const effectiveDuration = (trial: TrialResult) => trial.effectiveDuration ?? trial.duration;
