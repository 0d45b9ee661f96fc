import type { ProbeFigures } from '../../contract.js';
import type { EndReport } from '../../task.js';
import type { ProbeMeasured, ProbeReflector } from './measured.js';
import { withReflector } from './stats.js';

/** A probe leg's figures: the sender's, with the reflector's counts, and one-way delays only when both ends read one clock. */
export function probeResult(sender: EndReport | undefined, receiver: EndReport | undefined): ProbeFigures | null {
  const sent = measuredOf(sender);
  if (!sender || !sent || !('probe' in sent)) return null;
  const far = measuredOf(receiver);
  const reflector: ProbeReflector | null = far && 'reflector' in far ? far.reflector : null;
  const sharedClock = Boolean(sender.bootId && sender.bootId === receiver?.bootId);
  const figures = withReflector(sent.probe, reflector, sharedClock);
  const out: ProbeFigures = { ...figures, socketDrops: { ...figures.socketDrops, reflector: reflector?.rcvbufErrors ?? null } };
  if (figures.arrivalTimes) out.arrivalTimes = { ...figures.arrivalTimes, reflector: reflector?.arrivalTimes ?? null };
  return out;
}

const measuredOf = (end: EndReport | undefined) => (end?.measured ?? null) as ProbeMeasured | null;
