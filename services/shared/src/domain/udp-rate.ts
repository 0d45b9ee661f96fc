import type { JobSpec } from './contract.js';

/** A UDP stream's datagram size and rate, as a spec or a sweep point gives it (packets or bits per second). */
export type UdpSpec = NonNullable<JobSpec['udp']>;

/** Datagrams per second: bits are of payload (packetSize bytes per datagram). */
export function udpPacketsPerSecond({ packetSize, rate }: UdpSpec): number {
  return 'packetsPerSecond' in rate ? rate.packetsPerSecond : rate.bitsPerSecond / (packetSize * 8);
}

/** Payload bits per second. */
export function udpBitsPerSecond({ packetSize, rate }: UdpSpec): number {
  return 'bitsPerSecond' in rate ? rate.bitsPerSecond : rate.packetsPerSecond * packetSize * 8;
}
