import type { EndDiagnostics, EndFigures, Interval } from '@niclab/shared/domain/contract';
import { endFigures } from '@niclab/shared/domain/figures';
import type { EndUdp } from '@niclab/shared/domain/task';

/** The parts of iperf3's --json output (3.x) that niclab reads. */
export interface Iperf3Sum {
  start?: number;
  end?: number;
  seconds: number;
  bytes: number;
  bits_per_second: number;
  retransmits?: number;
  jitter_ms?: number;
  lost_packets?: number;
  packets?: number;
}

export interface Iperf3Json {
  error?: string;
  start?: { version?: string; sndbuf_actual?: number; rcvbuf_actual?: number; test_start?: { protocol?: string } };
  intervals?: { sum: Iperf3Sum }[];
  end?: {
    sum?: Iperf3Sum;
    sum_sent?: Iperf3Sum;
    sum_received?: Iperf3Sum;
    streams?: { udp?: { out_of_order?: number } }[];
    cpu_utilization_percent?: { host_total: number; host_user?: number; host_system?: number };
  };
}

export interface Iperf3End {
  figures: EndFigures;
  intervals: Interval[];
  retransmits: number | null;
  udp: EndUdp | null;
  socketBuffers: EndDiagnostics['socketBuffers'];
  version: string | undefined;
}

/**
 * One end's figures from its own iperf3 JSON: the client's sum_sent for the sender, the
 * server's sum_received for the receiver. CPU seconds are iperf3's host CPU shares (user and
 * system) times the end's seconds. iperf3 does not count TCP write/read calls, so those stay
 * null; for UDP a call is a datagram.
 */
export function parseEnd(json: Iperf3Json, role: 'sender' | 'receiver', packetSize: number | undefined): Iperf3End {
  const end = json.end ?? {};
  const sum = role === 'sender' ? end.sum_sent : end.sum_received;
  if (!sum) throw new Error(`iperf3 JSON has no end.${role === 'sender' ? 'sum_sent' : 'sum_received'}`);
  const udp = json.start?.test_start?.protocol === 'UDP';
  // iperf3's "host" shares are its own process's getrusage over the test, user and system apart.
  const shares = end.cpu_utilization_percent;
  const seconds = (percent: number | undefined) => Math.max(0, ((percent ?? 0) / 100) * sum.seconds);
  const cpu = { user: seconds(shares?.host_user), system: seconds(shares?.host_system ?? (shares?.host_total ?? 0) - (shares?.host_user ?? 0)) };
  const lost = sum.lost_packets ?? 0;
  const packets = sum.packets ?? 0;
  const datagrams = udp ? (role === 'sender' ? packets : packets - lost) : null;
  const bytes = udp && role === 'receiver' && packetSize ? datagrams! * packetSize : sum.bytes;
  return {
    figures: endFigures(bytes, sum.seconds, cpu, datagrams, shares !== undefined),
    intervals: role === 'receiver' ? (json.intervals ?? []).map(({ sum: s }) => ({ start: s.start ?? 0, end: s.end ?? 0, bitsPerSecond: s.bits_per_second, ...(udp && s.jitter_ms !== undefined ? { jitterSeconds: s.jitter_ms / 1000 } : {}) })) : [],
    retransmits: !udp && role === 'sender' ? (sum.retransmits ?? null) : null,
    udp: !udp
      ? null
      : role === 'sender'
        ? { sent: packets }
        : {
            received: packets - lost,
            lost,
            outOfOrder: (end.streams ?? []).reduce((n, s) => n + (s.udp?.out_of_order ?? 0), 0),
            jitterSeconds: (sum.jitter_ms ?? 0) / 1000,
            // iperf3 reads its clock after each recv(): the time its process read the datagram.
            arrivalTimes: 'process' as const,
          },
    socketBuffers: json.start?.sndbuf_actual !== undefined && json.start.rcvbuf_actual !== undefined ? { sendBytes: json.start.sndbuf_actual, receiveBytes: json.start.rcvbuf_actual } : undefined,
    version: json.start?.version,
  };
}
