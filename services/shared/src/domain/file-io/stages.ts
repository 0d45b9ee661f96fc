/**
 * A file job's stages side by side: per file point and leg, the source disk's read rate, the
 * network's (the memory point's rate on the same leg), the sink disk's write rate and the
 * transfer's, and the slowest named: Report.stages and its lines in the text table.
 */
import type { FileStage, JobSpec } from '../contract.js';
import type { components } from '../../generated/openapi.js';
import { pointKey, pointLabel } from '../plan.js';
import { alignTable } from '../text-table.js';

type Report = components['schemas']['Report'];
type Summary = FileStage['network'];
type Stage = NonNullable<FileStage['slowest']>;

const mbit = (s: Summary | undefined) => (s ? (s.mean / 1e6).toFixed(2) : '-');
const path = (s: Pick<FileStage, 'from' | 'to' | 'direction'>) => `${s.from.agent}:${s.from.interface} ${s.direction === 'forward' ? '->' : '<-'} ${s.to.agent}:${s.to.interface}`;

/** Every file point's stages, leg by leg, from the report's points (its memory points are the network's). */
export function fileStages(spec: JobSpec, points: Report['points']): FileStage[] {
  const file = spec.file;
  if (!file) return [];
  const byKey = new Map(points.map((p) => [pointKey(p.point), p]));
  return points
    .filter((p) => p.point.io !== 'memory')
    .flatMap((p) => {
      const memory = byKey.get(pointKey({ ...p.point, io: 'memory' }));
      return p.flows.map((leg) => {
        const network = memory?.flows.find((m) => m.flowIndex === leg.flowIndex && m.direction === leg.direction)?.bitsPerSecond ?? null;
        // The stages this point has: a source read, the network (measured at its memory point: a
        // job without one names no slowest), a sink written.
        const stages: [Stage, Summary, boolean][] = [
          ['source disk', leg.sourceDiskBitsPerSecond, file.source !== undefined],
          ['network', network, true],
          ['sink disk', leg.sinkDiskBitsPerSecond, file.sink === true],
        ];
        const stage = { point: p.point, flowIndex: leg.flowIndex, direction: leg.direction, from: leg.from, to: leg.to };
        const transfer = leg.bitsPerSecond;
        const missing = stages.filter(([, value, has]) => has && !value).map(([name]) => name);
        const measured = stages.filter((s): s is [Stage, NonNullable<Summary>, boolean] => s[2] && !!s[1]);
        const slowest = missing.length === 0 && measured.length > 0 ? [...measured].sort((a, b) => a[1].mean - b[1].mean)[0]! : null;
        const transferShare = transfer && network && network.mean > 0 ? transfer.mean / network.mean : null;
        return {
          ...stage,
          sourceDisk: leg.sourceDiskBitsPerSecond,
          network,
          sinkDisk: leg.sinkDiskBitsPerSecond,
          transfer,
          transferShare,
          slowest: slowest?.[0] ?? null,
          reason: reasonOf(slowest, measured, missing, transfer, transferShare),
        };
      });
    });
}

/** The stage named and by how much, with the transfer against memory to memory; or what was not measured. */
function reasonOf(slowest: [Stage, NonNullable<Summary>, boolean] | null, measured: [Stage, NonNullable<Summary>, boolean][], missing: Stage[], transfer: Summary, share: number | null): string {
  const moved = transfer ? `the file moved at ${mbit(transfer)} Mbit/s${share !== null ? `, ${(share * 100).toPrecision(3)}% of memory to memory` : ''}` : 'no file transfer succeeded';
  if (!slowest) return `${missing.length ? `not measured: ${missing.join(', ')}` : 'no stage measured'}; ${moved}`;
  const others = measured.filter(([name]) => name !== slowest[0]).map(([name, value]) => `the ${name} ${mbit(value)}`);
  return `${slowest[0]}: ${mbit(slowest[1])} Mbit/s${others.length ? ` against ${others.join(' and ')}` : ''}; ${moved}`;
}

/** The stages in the text table: one row per file point and leg (Mbit/s means), then each one's reason. */
export function stageLines(stages: FileStage[]): string[] {
  if (stages.length === 0) return [];
  const rows = [['point', 'flow', 'path', 'source disk', 'network', 'sink disk', 'transfer', 'of memory', 'slowest']];
  for (const s of stages) {
    rows.push([pointLabel(s.point), String(s.flowIndex), path(s), mbit(s.sourceDisk), mbit(s.network), mbit(s.sinkDisk), mbit(s.transfer), s.transferShare === null ? '-' : `${(s.transferShare * 100).toFixed(1)}%`, s.slowest ?? '-']);
  }
  return ['', 'stages, file against memory (Mbit/s, means over the runs):', alignTable(rows), ...stages.map((s) => `${pointLabel(s.point)} flow ${s.flowIndex}${s.direction === 'reverse' ? ' reverse' : ''}: ${s.reason}`)];
}
