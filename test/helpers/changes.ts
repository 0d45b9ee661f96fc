import { randomUUID } from 'node:crypto';
import type { FlowResult, JobSpec, Run } from '@niclab/shared/domain/contract';
import type { JobStore } from '@niclab/shared/stores/job-store';
import { seededRandom } from './random.js';
import { drive } from './search-path.js';

const A = { agent: 'A', interface: 'eth1' };
const B = { agent: 'B', interface: 'eth1' };
const START = Date.parse('2026-11-03T00:00:00Z');

/** An end's environment as an agent reads it, its tbf at `rateBytes` per second. */
export const environment = (rateBytes: number) => ({
  kernel: '6.1.0-27-amd64', driver: 'veth', firmware: null, mtu: 1500, speedBitsPerSecond: null, rmemMax: 212992, wmemMax: 212992,
  qdiscs: [{ kind: 'tbf', handle: '8001:', parent: 'root', options: { rate: rateBytes, burst: 15140, lat: 0.05 } }],
  congestionControl: 'cubic', tcpRmem: '4096 131072 6291456', tcpWmem: '4096 16384 4194304', cpuModel: 'QEMU Virtual CPU', cpuGovernor: null, niclabVersion: '0.1.0',
});

/**
 * A schedule's firings, saved as the coordinator saves them (JobStore.saveRun, whose observers
 * find change points): each a job of one A -> B run at `mbit` (noise of 1%), an hour apart.
 */
export function syntheticSchedule(store: JobStore, schedule: string, seed = 29) {
  const spec: JobSpec = {
    engine: 'builtin', test: 'stream', protocol: 'tcp', retries: 0, duration: 1, bufferLength: 131072, streams: 1, noDelay: false, direction: 'forward', interval: 1, repeat: 1,
    flows: [{ from: A, to: B }], labels: { schedule },
  };
  const r = seededRandom(seed);
  const noise = () => 0.01 * (Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r()));
  let fired = 0;
  /** Each firing's job, by its run's id. */
  const jobs = new Map<string, string>();
  /** One firing; `exact` keeps `mbit` as given (no noise), `differs` overrides the environment at both ends. */
  const fire = async (mbit: number, rateBytes: number, o: { status?: Run['status']; exact?: boolean; differs?: Record<string, unknown> } = {}): Promise<string> => {
    const status = o.status ?? 'succeeded';
    const jobId = randomUUID();
    await store.create(jobId, spec, 1);
    const end = (e: typeof A, address: string) => ({ ...e, address, command: ['niclab-engine'], engineVersion: 'builtin 0.1.0', environment: { ...environment(rateBytes), ...o.differs } });
    const flow: FlowResult = {
      flowIndex: 0, direction: 'forward', from: A, to: B, sender: null, receiver: null, bitsPerSecond: mbit * 1e6 * (o.exact ? 1 : 1 + noise()), retransmits: null, udp: null, rr: null, intervals: [],
      nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: { sender: end(A, '198.18.0.1'), receiver: end(B, '198.18.0.2') },
    };
    const run: Run = {
      id: randomUUID(), jobId, index: 0, point: {}, repetition: 1, status, startedAt: null, finishedAt: new Date(START + fired++ * 3_600_000).toISOString(),
      error: status === 'failed' ? { code: 'engine_failed', message: 'planted' } : null, flows: [flow],
    };
    await store.saveRun(run);
    jobs.set(run.id, jobId);
    return run.id;
  };
  return Object.assign(fire, { jobs });
}

/**
 * A schedule's rate search (binary, NDR, 1% resolution) fired as the coordinator fires it: a
 * job whose trials are driven against a path that loses above `capacity` datagrams/s, each
 * trial saved as a run, then the job ended, an hour after the previous firing.
 */
export function syntheticSearchSchedule(store: JobStore, schedule: string) {
  const spec = {
    engine: 'builtin', test: 'stream', protocol: 'udp', retries: 0, duration: 1, bufferLength: 131072, streams: 1, noDelay: false, direction: 'forward', interval: 1, repeat: 1,
    flows: [{ from: A, to: B }], labels: { schedule }, udp: { packetSize: 1000, rate: { packetsPerSecond: 1000 } },
    search: { target: 'ndr', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 100_000 }, resolutionPercent: 1, confirmations: 0, maxTrials: 40 },
  } as unknown as JobSpec;
  let fired = 0;
  return async (capacity: number): Promise<string> => {
    const jobId = randomUUID();
    const { runs } = drive(spec, (offered) => ({ lossRatio: offered > capacity ? (offered - capacity) / offered : 0 }));
    await store.create(jobId, spec, runs.length);
    await store.transition(jobId, ['queued'], 'running');
    const start = START + fired++ * 3_600_000;
    for (const [i, trial] of runs.entries()) {
      const finishedAt = new Date(start + (i + 1) * 2000).toISOString();
      const flow = { flowIndex: 0, direction: 'forward', from: A, to: B, sender: null, receiver: null, bitsPerSecond: trial.flows[0] ? (trial.flows[0].udp!.received * 8000) : null, retransmits: null, udp: trial.flows[0]?.udp ?? null, rr: null, intervals: [],
        nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: { sender: { ...A, address: '198.18.0.1', command: ['niclab-engine'], environment: environment(capacity * 1000) }, receiver: { ...B, address: '198.18.0.2', command: ['niclab-engine'], environment: environment(capacity * 1000) } } } as unknown as FlowResult;
      await store.saveRun({ ...trial, id: randomUUID(), jobId, finishedAt, flows: trial.status === 'succeeded' ? [flow] : [] });
    }
    await store.transition(jobId, ['running'], 'succeeded', { finishedAt: new Date(start + (runs.length + 1) * 2000).toISOString() });
    return jobId;
  };
}
