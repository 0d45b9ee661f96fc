/**
 * Bugs planted on purpose, each in one place, with the tests that must catch it. Each is a
 * wrong figure or a broken promise that once passed, or could pass, every test: see
 * test/mutants/run.ts. `from` must occur exactly once in `file`.
 */
export interface Mutant {
  id: string;
  /** What the bug does, as a user would see it. */
  what: string;
  file: string;
  from: string;
  to: string;
  /** Test files that must fail with it (run as `npm test` runs them). */
  tests: string[];
  /** Only the tests whose names match (node --test-name-pattern), to keep a run short. */
  pattern?: string;
}

const UDP_CHILD = 'services/agent/src/engines/builtin/udp-child.ts';
const FLOW_RESULT = 'services/coordinator/src/flow-result.ts';

export const MUTANTS: Mutant[] = [
  {
    id: 'throughput-doubled',
    what: "a flow's throughput adds the sender's rate to the receiver's (191 Mbit/s on a 100 Mbit/s link)",
    file: FLOW_RESULT,
    from: 'bitsPerSecond: received ? received.realBitsPerSecond : null,',
    to: 'bitsPerSecond: received ? received.realBitsPerSecond + (sent?.realBitsPerSecond ?? 0) : null,',
    tests: ['test/lab/flows.test.ts'],
    pattern: 'A -> D alone',
  },
  {
    id: 'udp-half-rate',
    what: 'the builtin UDP sender paces at half the requested packet rate',
    file: UDP_CHILD,
    from: 'const pps = udpPacketsPerSecond(input.params.udp!);',
    to: 'const pps = udpPacketsPerSecond(input.params.udp!) / 2;',
    tests: ['test/lab/udp.test.ts'],
    pattern: '20,000 pps',
  },
  {
    id: 'udp-slow-receiver',
    what: 'the builtin UDP receiver busy-waits 250 us per datagram, so its own socket drops',
    file: UDP_CHILD,
    from: "socket.on('message', (message: Buffer) => {",
    to: "socket.on('message', (message: Buffer) => {\n      for (const until = performance.now() + 0.25; performance.now() < until; );",
    tests: ['test/lab/udp.test.ts'],
    pattern: "the loss is the shaper's alone",
  },
  {
    id: 'udp-foreign-leg',
    what: "the builtin UDP receiver counts another leg's datagrams as its own",
    file: UDP_CHILD,
    from: ' || message.readUInt32BE(4) !== input.token) return;',
    to: ') return;',
    tests: ['test/engines/builtin-udp.test.ts'],
    pattern: 'another leg',
  },
  {
    id: 'udp-rate-in-bytes',
    what: 'a UDP rate in bits/s is converted to datagrams/s as if it were bytes/s (a wrong unit)',
    file: 'services/shared/src/domain/udp-rate.ts',
    from: 'rate.bitsPerSecond / (packetSize * 8)',
    to: 'rate.bitsPerSecond / packetSize',
    tests: ['test/e2e/loopback.test.ts'],
    pattern: 'UDP',
  },
  {
    id: 'report-mbit-binary',
    what: "the report's Mbit/s columns divide by 2^20 instead of 10^6 (a wrong unit)",
    file: 'services/shared/src/domain/report.ts',
    from: 'fixed(avg((e) => e.realBitsPerSecond / 1e6), 4),',
    to: 'fixed(avg((e) => e.realBitsPerSecond / 2 ** 20), 4),',
    tests: ['test/api/report.test.ts'],
  },
  {
    id: 'ends-swapped',
    what: "the coordinator files the receiver's report as the sender's and the sender's as the receiver's",
    file: 'services/coordinator/src/run-execution.ts',
    from: 'flowResult(job.spec.flows[leg.flowIndex]!, leg, this.senders.get(i), this.receivers.get(i))',
    to: 'flowResult(job.spec.flows[leg.flowIndex]!, leg, this.receivers.get(i), this.senders.get(i))',
    tests: ['test/e2e/loopback.test.ts'],
  },
  {
    id: 'interval-dropped',
    what: "the builtin receiver's first interval sample is never recorded",
    file: 'services/agent/src/engines/builtin/interval-sampler.ts',
    from: 'this.intervals.push(sample);',
    to: 'if (this.sampledBytes > 0) this.intervals.push(sample);',
    tests: ['test/engines/intervals.test.ts'],
  },
  {
    id: 'iperf3-interval-dropped',
    what: "iperf3's first interval is dropped when its JSON is parsed",
    file: 'services/agent/src/engines/iperf3/parse.ts',
    from: '(json.intervals ?? []).map(',
    to: '(json.intervals ?? []).slice(1).map(',
    tests: ['test/engines/intervals.test.ts'],
  },
  {
    id: 'sweep-off-by-one',
    what: "a sweep dimension's last value is never run",
    file: 'services/shared/src/domain/plan.ts',
    from: 'points = points.flatMap((point) => values.map(',
    to: 'points = points.flatMap((point) => values.slice(0, -1).map(',
    tests: ['test/e2e/campaign.test.ts'],
    pattern: 'sweep',
  },
  {
    id: 'lease-never-released',
    what: "a run's interface leases are never released (later runs wait for them to lapse)",
    file: 'services/shared/src/stores/leases.ts',
    from: 'return this.releaseScript(this.keyList(targets), holder);',
    to: 'return 0;',
    tests: ['test/coordinator/leases.test.ts'],
  },
  {
    id: 'path-always-verified',
    what: 'pathVerified is true whatever the named interfaces carried',
    file: FLOW_RESULT,
    from: 'nicSender.txBytes >= sent.bytes && nicReceiver.rxBytes >= received.bytes;',
    to: 'true;',
    tests: ['test/lab/flows.test.ts'],
    pattern: 'pathVerified false',
  },
  {
    id: 'rate-limit-100',
    what: 'the API limits a token at 100 requests a minute whatever its policy says',
    file: 'services/api/src/access.ts',
    from: 'if (count > policy.requestsPerMinute) {',
    to: 'if (count > Math.min(policy.requestsPerMinute, 100)) {',
    tests: ['test/api/access.test.ts'],
  },
  {
    id: 'agent-no-deadline',
    what: "the agent's deadline timer fires ten times too late",
    file: 'services/agent/src/agent.ts',
    from: 'Math.max(0, task.deadline - Date.now()),',
    to: 'Math.max(0, task.deadline - Date.now()) * 10,',
    tests: ['test/engines/contract.test.ts'],
  },
  {
    id: 'tcp-buffer-ignored',
    what: "the builtin TCP sender never applies socketBuffer (its receiver's buffer still does)",
    file: 'services/agent/src/engines/builtin/tcp-child.ts',
    from: '  if (input.params.socketBuffer !== undefined) setSocketBuffers(socket, input.params.socketBuffer);\n',
    to: '',
    tests: ['test/lab/tcp.test.ts'],
    pattern: 'builtin: effective',
  },
  {
    id: 'lease-without-ttl',
    what: 'a lease is taken without its TTL, so a dead holder keeps it for ever',
    file: 'services/shared/src/stores/leases.ts',
    from: "for _, key in ipairs(KEYS) do redis.call('SET', key, ARGV[1], 'PX', ARGV[2]) end",
    to: "for _, key in ipairs(KEYS) do redis.call('SET', key, ARGV[1]) end",
    tests: ['test/coordinator/leases.test.ts'],
  },
  {
    id: 'never-running',
    what: 'a running job is shown as queued until it ends',
    file: 'services/shared/src/stores/job-store.ts',
    from: '    status: row.status as JobStatus,',
    to: "    status: (row.status === 'running' ? 'queued' : row.status) as JobStatus,",
    tests: ['test/e2e/loopback.test.ts'],
    pattern: 'queued -> running -> succeeded',
  },
  {
    id: 'nic-absolute',
    what: "an interface's counters are reported as their absolute values, not the run's deltas",
    file: 'services/agent/src/interfaces.ts',
    from: 'out[key] = after[key] - before[key];',
    to: 'out[key] = after[key];',
    tests: ['test/e2e/loopback.test.ts'],
    pattern: 'queued -> running -> succeeded',
  },
  {
    id: 'agent-body-off-contract',
    what: 'GET /v1/agents/{id} answers a body the contract does not allow',
    file: 'services/api/src/handlers/agents.ts',
    from: '  return { status: 200, body: agent };',
    to: "  return { status: 200, body: { ...agent, online: 'yes' } };",
    tests: ['test/api/fuzz.test.ts'],
  },
  {
    id: 'interval-unchecked',
    what: 'an interval longer than the run is accepted (and the job queued)',
    file: 'services/api/src/submission.ts',
    from: 'if (spec.interval !== undefined && spec.interval > spec.duration)',
    to: 'if (spec.interval !== undefined && spec.interval > spec.duration * 100)',
    tests: ['test/api/jobs.test.ts'],
  },
  {
    id: 'heartbeats-ten',
    what: 'an agent is declared lost after 10 missed heartbeats instead of 3',
    file: 'services/shared/src/stores/agent-registry.ts',
    from: 'export const MISSED_HEARTBEATS = 3;',
    to: 'export const MISSED_HEARTBEATS = 10;',
    tests: ['test/faults/agent-kill.test.ts'],
  },
  {
    id: 'shutdown-as-lost',
    what: 'an agent stopped with SIGTERM reports its ends as agent_lost instead of agent_shutdown',
    file: 'services/agent/src/agent.ts',
    from: "controller.abort({ code: 'agent_shutdown'",
    to: "controller.abort({ code: 'agent_lost'",
    tests: ['test/faults/agent-term.test.ts'],
  },
  {
    id: 'retry-forgets-attempt',
    what: "a retried run records the job's id as its earlier attempt's, not the lost run's",
    file: 'services/coordinator/src/retry-policy.ts',
    from: 'this.earlier.push({ id: run.id,',
    to: 'this.earlier.push({ id: run.jobId,',
    tests: ['test/faults/agent-kill.test.ts'],
    pattern: 'builtin',
  },
  {
    id: 'stalled-check-slow',
    what: "a dead coordinator's job is looked for every 15 s instead of 5 s",
    file: 'services/coordinator/src/coordinator.ts',
    from: 'const JOB_STALLED_CHECK_MS = 5000;',
    to: 'const JOB_STALLED_CHECK_MS = 15000;',
    tests: ['test/faults/coordinator-kill.test.ts'],
  },
  {
    id: 'resume-redoes-all',
    what: 'a resumed job forgets its finished runs and makes them again',
    file: 'services/coordinator/src/coordinator.ts',
    from: 'const finished = new Map(stored.filter(isFinished).map((r) => [r.index, r]));',
    to: 'const finished = new Map<number, Run>();',
    tests: ['test/faults/api-restart.test.ts'],
  },
  {
    id: 'status-index-stale',
    what: "a job moved to another status stays listed under its old one",
    file: 'services/shared/src/stores/job-store.ts',
    from: "  redis.call('ZREM', KEYS[2] .. ':' .. cur, member)\n",
    to: '',
    tests: ['test/faults/redis-kill.test.ts'],
  },
];
