/**
 * Which test files need the machine to themselves. `npm test` (test/run.ts) runs these one at a
 * time with nothing beside them; every other file runs in the concurrent tier. A file belongs
 * here when it asserts a ratio or a timing that another process's load would move: niclab
 * against bare iperf3 or irtt, a rate against a shaper, a CPU verdict, a delay.
 */
export const SERIAL: Record<string, string> = {
  'test/lab/flows.test.ts': 'throughput against bare iperf3 and the shapers, fan-in shares',
  'test/lab/udp.test.ts': "packet rates at B's NIC against bare iperf3 -u, receiver drops",
  'test/lab/tcp.test.ts': 'TCP throughput and CPU against bare iperf3',
  'test/lab/latency.test.ts': 'round trips under load against an idle baseline',
  'test/lab/queue.test.ts': "a queue's delay against irtt and the kernel's backlog",
  'test/lab/probe.test.ts': "the probe's round trips against irtt's",
  'test/lab/compare.test.ts': 'A/B verdicts on shaped links',
  'test/lab/attribution.test.ts': 'CPU verdicts from a starved sender',
  'test/engines/builtin-udp.test.ts': 'receiver drops and achieved rate on loopback',
  'test/engines/probe-loopback.test.ts': "the probe's idle round trip against ping's and irtt's, within 0.05 ms",
  // Not a ratio, but the podman build takes both cores for minutes: in the concurrent tier a lab
  // search beside it found its PDR 4.7% below the shaper, and an in-process agent missed three
  // 1 s heartbeats. Its agent container also shares the host's lo with every other test.
  'test/container/image.container.ts': "the image's build and its loopback job through host networking",
};

/**
 * Concurrent-tier files that take a minute or more (seconds in the last fresh-clone run: the rate
 * search 221, the README tour 92, the lab groups 88, the coordinator's kill 84 of mostly
 * waiting, schema-requests 71, Redis's kill 71, the CLI 52-59, the API groups 56): they start
 * first, so the tier does not end with one of them running alone (the coordinator's kill and the
 * lab groups, last in file order, did: 84 and 88 s at the tier's end).
 */
export const FIRST: readonly string[] = [
  'test/lab/search.test.ts',
  'test/lab/groups.test.ts',
  'test/tour/readme.test.ts',
  'test/faults/coordinator-kill.test.ts',
  'test/api/schema-requests.test.ts',
  'test/faults/redis-kill.test.ts',
  'test/e2e/cli.test.ts',
  'test/api/groups.test.ts',
];
