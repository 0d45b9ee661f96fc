import type { ErrorInfo, FlowResult, FlowSpec } from '@niclab/shared/contract';
import type { EndReport, Leg } from '@niclab/shared/task';

/** Errors that are consequences of another failure; a root cause is reported in preference. */
const CONSEQUENCES = new Set(['canceled', 'deadline_exceeded', 'no_data', 'no_report']);

export function pickError(errors: (ErrorInfo | null | undefined)[]): ErrorInfo | null {
  const present = errors.filter((e): e is ErrorInfo => !!e);
  return present.find((e) => !CONSEQUENCES.has(e.code)) ?? present[0] ?? null;
}

/** One leg's result from its two ends' reports. */
export function flowResult(flow: FlowSpec, leg: Leg, sender: EndReport | undefined, receiver: EndReport | undefined): FlowResult {
  const missing = (end: string, endpoint: Leg['sender']): ErrorInfo => ({
    code: 'no_report',
    message: `the ${end} on agent ${endpoint.agent} (${endpoint.interface}) did not report before the run's deadline`,
  });
  const error = pickError([sender?.error, receiver?.error, sender ? null : missing('sender', leg.sender), receiver ? null : missing('receiver', leg.receiver)]);
  const sent = sender?.figures ?? null;
  const received = receiver?.figures ?? null;
  const nicSender = sender?.nic ?? null;
  const nicReceiver = receiver?.nic ?? null;
  // The named interfaces carried the leg when their counters account for at least its payload.
  const pathVerified = error || !sent || !received || !nicSender || !nicReceiver ? null : nicSender.txBytes >= sent.bytes && nicReceiver.rxBytes >= received.bytes;
  const forward = leg.direction === 'forward';
  const result: FlowResult = {
    flowIndex: leg.flowIndex,
    direction: leg.direction,
    from: flow.from,
    to: flow.to,
    sender: sent,
    receiver: received,
    bitsPerSecond: received ? received.realBitsPerSecond : null,
    retransmits: null,
    udp: null,
    intervals: receiver?.intervals ?? [],
    nic: forward ? { from: nicSender, to: nicReceiver } : { from: nicReceiver, to: nicSender },
    pathVerified,
    error,
    diagnostics: {},
  };
  if (sender) result.diagnostics.sender = sender.diagnostics;
  if (receiver) result.diagnostics.receiver = receiver.diagnostics;
  return result;
}
