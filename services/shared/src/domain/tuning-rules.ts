import type { FieldError, JobSpec } from './contract.js';
import type { components } from '../generated/openapi.js';
import { qdiscErrors } from './qdisc-rules.js';

/** A job's tuning: the shorthand for both ends, and each role's own block. */
export type Tuning = NonNullable<JobSpec['tuning']>;
/** What one end applies to its interface and host: its merged tuning, as an agent's task carries it. */
export type EndTuning = components['schemas']['EndTuning'];

/** The sysctls a job may set: socket buffers and TCP behaviour, nothing that opens the host up. */
export const SYSCTLS: readonly string[] = [
  'net.core.rmem_max', 'net.core.wmem_max', 'net.core.rmem_default', 'net.core.wmem_default',
  'net.core.netdev_max_backlog', 'net.core.optmem_max',
  'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem', 'net.ipv4.udp_rmem_min', 'net.ipv4.udp_wmem_min',
  'net.ipv4.tcp_timestamps', 'net.ipv4.tcp_sack', 'net.ipv4.tcp_window_scaling',
  'net.ipv4.tcp_no_metrics_save', 'net.ipv4.tcp_mtu_probing', 'net.ipv4.tcp_slow_start_after_idle',
];

/** ethtool -K features by the short name a job uses, and the name `ethtool -k` prints. */
export const FEATURES: Readonly<Record<string, string>> = {
  tso: 'tcp-segmentation-offload',
  gso: 'generic-segmentation-offload',
  gro: 'generic-receive-offload',
  lro: 'large-receive-offload',
  sg: 'scatter-gather',
  rx: 'rx-checksumming',
  tx: 'tx-checksumming',
};

/** ethtool -G ring sizes by the name a job uses, and the parameter ethtool takes. */
export const RINGS: Readonly<Record<string, string>> = { 'rx-ring': 'rx', 'tx-ring': 'tx' };

/** What the schema cannot say about a job's `tuning`: the shorthand's and each role's block's. */
export function jobTuningErrors({ sender, receiver, ...shorthand }: Tuning, root: string): FieldError[] {
  return [...tuningErrors(shorthand, root), ...(sender ? tuningErrors(sender, `${root}.sender`) : []), ...(receiver ? tuningErrors(receiver, `${root}.receiver`) : [])];
}

/** What the schema cannot say about one end's settings: the allow-lists and the value each setting takes. */
export function tuningErrors(tuning: EndTuning, root: string): FieldError[] {
  const errors: FieldError[] = [];
  for (const name of Object.keys(tuning.sysctl ?? {})) {
    if (!SYSCTLS.includes(name)) errors.push({ field: `${root}.sysctl.${name}`, message: `is not a sysctl niclab may set (allowed: ${SYSCTLS.join(', ')})` });
  }
  for (const [name, value] of Object.entries(tuning.ethtool ?? {})) {
    if (FEATURES[name]) {
      if (typeof value !== 'boolean' && value !== 'on' && value !== 'off') errors.push({ field: `${root}.ethtool.${name}`, message: 'must be true/false or "on"/"off"' });
    } else if (RINGS[name]) {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65536) errors.push({ field: `${root}.ethtool.${name}`, message: 'must be a ring size from 1 to 65536' });
    } else {
      errors.push({ field: `${root}.ethtool.${name}`, message: `is not a setting niclab may change (allowed: ${[...Object.keys(FEATURES), ...Object.keys(RINGS)].join(', ')})` });
    }
  }
  if (tuning.qdisc) errors.push(...qdiscErrors(tuning.qdisc, `${root}.qdisc`));
  return errors;
}
