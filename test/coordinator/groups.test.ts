import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { Agent, FlowSpec, Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import { expandGroup, expandSpec } from '@niclab/shared/domain/groups';
import { maxDegree, planRounds } from '@niclab/shared/domain/rounds';
import { campaignOf, strategyFor } from '@niclab/shared/domain/campaigns/index';
import { buildReport, reportTable } from '@niclab/shared/domain/report';
import { runSpec } from '@niclab/shared/domain/plan';
import { pairOutcome } from '@niclab/shared/domain/pair-outcome';
import { specOf } from '@niclab/cli/client/spec';

/**
 * Groups of flows (mesh, disjoint, star): their expansion against an inventory, the rounds
 * they run in, and the campaign that runs them. The lab's test (test/lab/groups.test.ts)
 * runs them on real interfaces.
 */

function agent(id: string, labels: Record<string, string>, options: { online?: boolean; interfaces?: Agent['interfaces'] } = {}): Agent {
  const n = Number(id.replace(/\D/g, '')) || 1;
  return {
    id, hostname: id, labels, online: options.online ?? true, lastSeen: '2026-01-01T00:00:00.000Z', startedAt: '2026-01-01T00:00:00.000Z',
    version: 'test', kernel: 'test', heartbeatSeconds: 5, engines: {},
    interfaces: options.interfaces ?? [
      { name: 'eth1', mac: null, mtu: 1500, speedBitsPerSecond: null, operstate: 'up', driver: 'veth', addresses: [{ family: 'IPv4', address: `198.18.1.${n}`, prefixLength: 24 }] },
      { name: 'eth2', mac: null, mtu: 1500, speedBitsPerSecond: null, operstate: 'up', driver: 'veth', addresses: [{ family: 'IPv4', address: `198.19.2.${n}`, prefixLength: 24 }] },
    ],
  };
}

const key = (p: FlowSpec) => `${p.from.agent}:${p.from.interface}>${p.to.agent}:${p.to.interface}`;

/** Every pair in exactly one round, and no interface twice in a round. */
function assertValidRounds(pairs: FlowSpec[], rounds: number[][]): void {
  assert.deepEqual(rounds.flat().sort((a, b) => a - b), pairs.map((_, i) => i), 'every pair once');
  for (const round of rounds) {
    const ends = round.flatMap((i) => [pairs[i]!.from, pairs[i]!.to].map((e) => `${e.agent}:${e.interface}`));
    assert.equal(new Set(ends).size, ends.length, `an interface twice in round ${JSON.stringify(round.map((i) => key(pairs[i]!)))}`);
  }
}

const meshOf = (n: number): FlowSpec[] => {
  const ends = Array.from({ length: n }, (_, i) => ({ agent: `h${i}`, interface: 'eth1' }));
  return ends.flatMap((from) => ends.filter((to) => to !== from).map((to) => ({ from, to })));
};

test('a mesh of N one-interface hosts runs in 2(N-1) rounds for even N and 2N for odd N, each pair once, no interface twice in a round', () => {
  fc.assert(
    fc.property(fc.integer({ min: 2, max: 40 }), fc.integer({ min: 0, max: 1000 }), (n, seed) => {
      // The pairs in any order: the plan must not depend on it.
      const pairs = fc.sample(fc.shuffledSubarray(meshOf(n), { minLength: n * (n - 1) }), { numRuns: 1, seed })[0]!;
      const rounds = planRounds(pairs);
      assertValidRounds(pairs, rounds);
      assert.equal(rounds.length, n % 2 === 0 ? 2 * (n - 1) : 2 * n);
    }),
    { numRuns: 60 },
  );
});

test('any set of pairs: every pair once, no interface twice in a round, between Δ and 2Δ-1 rounds (Δ the most pairs at one interface)', () => {
  const endpoint = fc.record({ agent: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), interface: fc.constantFrom('eth1', 'eth2') });
  const pair = fc.record({ from: endpoint, to: endpoint }).filter((p) => p.from.agent !== p.to.agent);
  fc.assert(
    fc.property(fc.uniqueArray(pair, { selector: key, maxLength: 60 }), (pairs) => {
      const rounds = planRounds(pairs);
      assertValidRounds(pairs, rounds);
      const delta = maxDegree(pairs);
      assert.ok(rounds.length >= delta && rounds.length <= Math.max(0, 2 * delta - 1), `${rounds.length} rounds for Δ ${delta}`);
    }),
    { numRuns: 300 },
  );
});

test('a star both ways runs in exactly 2 × members rounds (every pair holds the center)', () => {
  const agents = ['c1', 'm1', 'm2', 'm3', 'm4'].map((id) => agent(id, { role: id.startsWith('c') ? 'center' : 'member' }));
  const { pairs } = expandGroup({ shape: 'star', center: { labels: { role: 'center' }, interface: 'eth1' }, members: { labels: { role: 'member' }, interface: 'eth1' } }, agents);
  assert.equal(pairs.length, 8);
  assert.equal(planRounds(pairs).length, 8);
});

test('a mesh expands to every ordered pair of the labelled, online members; others are skipped with the reason', () => {
  const agents = [
    agent('a1', { rack: 'a' }), agent('a2', { rack: 'a', role: 'lab' }), agent('a3', { rack: 'a' }),
    agent('a4', { rack: 'a' }, { online: false }),
    agent('a5', { rack: 'a' }, { interfaces: [] }),
    agent('b1', { rack: 'b' }),
  ];
  const { pairs, skipped } = expandGroup({ shape: 'mesh', members: { labels: { rack: 'a' }, interface: 'eth1' } }, agents);
  assert.deepEqual(pairs.map(key).sort(), ['a1:eth1>a2:eth1', 'a1:eth1>a3:eth1', 'a2:eth1>a1:eth1', 'a2:eth1>a3:eth1', 'a3:eth1>a1:eth1', 'a3:eth1>a2:eth1']);
  assert.deepEqual(skipped.map((s) => [s.agent, s.reason]), [['a4', 'offline'], ['a5', 'no_interface']]);
});

test('members by prefix take the interface with an address in it; two such interfaces are ambiguous; a down interface is skipped', () => {
  const down = agent('x3', { lab: 'n' });
  down.interfaces[1]!.operstate = 'down';
  const two = agent('x4', { lab: 'n' });
  two.interfaces[0]!.addresses.push({ family: 'IPv4', address: '198.19.2.99', prefixLength: 24 });
  const { pairs, skipped } = expandGroup({ shape: 'mesh', members: { labels: { lab: 'n' }, prefix: '198.19.2.0/24' } }, [agent('x1', { lab: 'n' }), agent('x2', { lab: 'n' }), down, two]);
  assert.deepEqual(pairs.map(key).sort(), ['x1:eth2>x2:eth2', 'x2:eth2>x1:eth2']);
  assert.deepEqual(skipped.map((s) => [s.agent, s.reason, s.interface]), [['x3', 'interface_down', 'eth2'], ['x4', 'ambiguous_interface', null]]);
});

test('disjoint is a × b without pairs inside one agent; star goes to, from or both ways', () => {
  const agents = [agent('a1', { rack: 'a' }), agent('a2', { rack: 'a' }), agent('b1', { rack: 'b' }), agent('b2', { rack: 'b' }), agent('b3', { rack: 'b', lab: 'y' })];
  const disjoint = expandGroup({ shape: 'disjoint', a: { labels: { rack: 'a' }, interface: 'eth1' }, b: { labels: {}, interface: 'eth1' } }, agents);
  // b is every agent, a1 and a2 included: a1 -> a1 is left out.
  assert.equal(disjoint.pairs.length, 2 * 5 - 2);
  assert.ok(disjoint.pairs.every((p) => p.from.agent.startsWith('a') && p.from.agent !== p.to.agent));
  const star = (starDirection: 'to' | 'from' | 'both') => expandGroup({ shape: 'star', starDirection, center: { labels: { lab: 'y' }, interface: 'eth1' }, members: { labels: { rack: 'a' }, interface: 'eth1' } }, agents).pairs.map(key).sort();
  assert.deepEqual(star('to'), ['a1:eth1>b3:eth1', 'a2:eth1>b3:eth1']);
  assert.deepEqual(star('from'), ['b3:eth1>a1:eth1', 'b3:eth1>a2:eth1']);
  assert.equal(star('both').length, 4);
});

const request = (extra: Record<string, unknown> = {}) =>
  ({ engine: 'builtin', test: 'stream', protocol: 'tcp', duration: 1, direction: 'forward', repeat: 1, retries: 0, flows: { shape: 'mesh', members: { labels: { rack: 'a' }, interface: 'eth1' } }, ...extra }) as unknown as Parameters<typeof expandSpec>[0];

test('a spec with a group keeps the group, stores the pairs as flows, and counts a run per pair per repetition', () => {
  const agents = ['a1', 'a2', 'a3', 'a4'].map((id) => agent(id, { rack: 'a' }));
  const { spec, expansion, errors } = expandSpec(request({ repeat: 2 }), agents);
  assert.deepEqual(errors, []);
  assert.equal(spec.flows.length, 12);
  assert.equal(spec.group?.shape, 'mesh');
  assert.equal(expansion?.rounds.length, 6);
  assert.equal(campaignOf(spec).maxRuns(spec).runs, 24);
  assert.equal(strategyFor(spec).expectedRuns(new Map()), 24);
  const none = expandSpec(request(), [agent('a1', { rack: 'a' })]);
  assert.match(none.errors[0]!.message, /no pair now/);
  assert.equal(none.errors[0]!.field, 'body.flows');
  assert.deepEqual(expandSpec(request({ repeat: { min: 2, max: 5 } }), agents).errors.map((e) => e.field), ['body.repeat']);
});

function runOf(spec: JobSpec, index: number, pair: number, bitsPerSecond: number | null): Run {
  const flow = spec.flows[pair]!;
  return {
    id: `r${index}`, jobId: 'j', index, point: {}, repetition: 1, status: bitsPerSecond === null ? 'failed' : 'succeeded', startedAt: null, finishedAt: null,
    error: bitsPerSecond === null ? { code: 'peer_unavailable', message: 'no receiver' } : null,
    flows: [{ flowIndex: pair, direction: 'forward', from: flow.from, to: flow.to, bitsPerSecond: bitsPerSecond ?? 0, pathVerified: true } as Run['flows'][number]],
  };
}

test('the campaign gives the rounds one after the other, all of a round at once; the report is the matrix', () => {
  const agents = ['a1', 'a2', 'a3'].map((id) => agent(id, { rack: 'a' }));
  const { spec, expansion } = expandSpec(request(), agents);
  const strategy = strategyFor(spec);
  const finished = new Map<number, Run>();
  const seen: number[][] = [];
  for (let round = strategy.nextRound!(finished); round.length > 0; round = strategy.nextRound!(finished)) {
    seen.push(round.map((p) => p.pair!));
    // Each run carries its pair alone.
    for (const plan of round) assert.deepEqual(runSpec(spec, plan).flows, [spec.flows[plan.pair!]]);
    for (const plan of round) finished.set(plan.index, runOf(spec, plan.index, plan.pair!, key(spec.flows[plan.pair!]!) === 'a2:eth1>a3:eth1' ? null : 1e9 + plan.pair! * 1e6));
  }
  assert.deepEqual(seen, expansion!.rounds);
  assert.equal(seen.length, 6);
  const job = { id: 'j', status: 'failed', spec, expansion: { ...expansion!, skipped: [{ agent: 'a9', interface: 'eth1', reason: 'offline', message: 'agent "a9" is offline' }] } } as Job;
  const report = buildReport(job, [...finished.values()]);
  const [matrix] = report.matrix!;
  assert.deepEqual(matrix!.sources.map((e) => e.agent), ['a1', 'a2', 'a3']);
  assert.equal(matrix!.cells[0]![0], null, 'no pair from a host to itself');
  const a1a2 = spec.flows.findIndex((p) => key(p) === 'a1:eth1>a2:eth1');
  assert.equal(matrix!.cells[0]![1]!.value!.mean, 1e9 + a1a2 * 1e6);
  assert.equal(matrix!.cells[1]![2]!.verdict, 'failed');
  const table = reportTable(job, [...finished.values()], report);
  assert.match(table, /mesh matrix: 6 pairs in 6 rounds/);
  assert.match(table, /a2:eth1\s+\S+\s+-\s+FAILED/);
  assert.match(table, /skipped a9:eth1 \(offline\)/);
});

test('a failed pair does not fail the job: the others keep their figures, the job lists the failed pair and why; no pair measured fails it', () => {
  const agents = ['a1', 'a2', 'a3'].map((id) => agent(id, { rack: 'a' }));
  const { spec, expansion } = expandSpec(request({ repeat: 2 }), agents);
  const strategy = strategyFor(spec);
  const bad = spec.flows.findIndex((p) => key(p) === 'a2:eth1>a3:eth1');
  // a2 -> a3 fails both times; a1 -> a2 fails its first repetition and succeeds its second (measured).
  const flaky = spec.flows.findIndex((p) => key(p) === 'a1:eth1>a2:eth1');
  const finished = new Map<number, Run>();
  for (let round = strategy.nextRound!(finished); round.length > 0; round = strategy.nextRound!(finished)) {
    for (const plan of round) {
      const fails = plan.pair === bad || (plan.pair === flaky && plan.repetition === 1);
      finished.set(plan.index, { ...runOf(spec, plan.index, plan.pair!, fails ? null : 9e8), repetition: plan.repetition });
    }
  }
  assert.equal(finished.size, 12);
  assert.equal(strategy.outcome(finished), null, 'five of six pairs measured: the job succeeds');
  const pairs = pairOutcome(spec, finished.values());
  assert.deepEqual({ total: pairs.total, measured: pairs.measured, failed: pairs.failed }, { total: 6, measured: 5, failed: 1 });
  assert.deepEqual(pairs.failures.map((f) => [f.pair, `${f.from.agent}>${f.to.agent}`, f.error.code]), [[bad, 'a2>a3', 'peer_unavailable']]);
  const job = { id: 'j', status: 'succeeded', spec, expansion, pairs } as Job;
  const report = buildReport(job, [...finished.values()]);
  const cells = report.matrix![0]!.cells;
  assert.equal(cells[1]![2]!.verdict, 'failed');
  assert.equal(cells[1]![2]!.error?.code, 'peer_unavailable');
  assert.deepEqual(cells[0]![1]!.runs, { succeeded: 1, failed: 1 });
  assert.equal(cells[0]![1]!.value!.mean, 9e8, 'the flaky pair keeps its succeeded run');
  const table = reportTable(job, [...finished.values()], report);
  assert.match(table, /a2:eth1\s+\S+\s+-\s+FAILED peer_unavailable/);
  assert.match(table, /pairs measured: 5 of 6; 1 failed/);
  assert.match(table, /failed pair a2:eth1 -> a3:eth1: peer_unavailable: no receiver/);

  const allFailed = new Map([...finished].map(([i, run]) => [i, { ...run, status: 'failed' as const, error: { code: 'agent_offline' as const, message: 'agent a1 is offline' } }]));
  const error = strategy.outcome(allFailed);
  assert.equal(error?.code, 'agent_offline', 'no pair measured: the job fails with their common reason');
  assert.match(error!.message, /all 6 pairs failed/);
});

test('a matrix cell carries the UDP loss (mean over succeeded runs) and the bottleneck most runs gave, in JSON and text', () => {
  const agents = ['a1', 'a2'].map((id) => agent(id, { rack: 'a' }));
  const { spec, expansion } = expandSpec(request({ protocol: 'udp', repeat: 3, udp: { packetSize: 1400, rate: { packetsPerSecond: 1000 } } }), agents);
  const bottleneck = (verdict: 'link' | 'receiver socket buffer') => ({ verdict, reason: `${verdict} reason`, evidence: {}, confident: true });
  const runs: Run[] = [];
  let index = 0;
  for (const [pair] of spec.flows.entries()) {
    const perRep = pair === 0 ? [[0.01, 'receiver socket buffer'], [0.03, 'receiver socket buffer'], [0.05, 'link']] as const : [[0, 'link'], [0, 'link'], [0, 'link']] as const;
    for (const [rep, [lossRatio, verdict]] of perRep.entries()) {
      const run = runOf(spec, index++, pair, 1e8);
      run.repetition = rep + 1;
      Object.assign(run.flows[0]!, { udp: { sent: 1000, received: 1000 * (1 - lossRatio), lost: 1000 * lossRatio, outOfOrder: 0, duplicates: 0, jitterSeconds: 0, lossRatio }, bottleneck: bottleneck(verdict) });
      runs.push(run);
    }
  }
  const job = { id: 'j', status: 'succeeded', spec, expansion } as Job;
  const report = buildReport(job, runs);
  const lossy = report.matrix![0]!.cells[spec.flows[0]!.from.agent === 'a1' ? 0 : 1]![spec.flows[0]!.from.agent === 'a1' ? 1 : 0]!;
  assert.ok(Math.abs(lossy.lossRatio! - 0.03) < 1e-12, `mean loss ${lossy.lossRatio}`);
  assert.deepEqual(lossy.bottleneck, { verdict: 'receiver socket buffer', reason: 'receiver socket buffer reason', confident: true, runs: 2 });
  const table = reportTable(job, runs, report);
  assert.match(table, /100\.00 3\.00% \[receiver socket buffer\]/);
  assert.match(table, /100\.00 0\.00% \[link\]/);
  // Bidir: each run has a reverse leg too. The forward leg is lossless but shaped (link); the
  // reverse one loses 40% in its receiver's socket buffer: the cell is the reverse leg's, loss and
  // verdict both, and says so (it read "40.00% [link]": one leg's loss beside the other's verdict).
  const lossless = { sent: 1000, received: 1000, lost: 0, outOfOrder: 0, duplicates: 0, jitterSeconds: 0, lossRatio: 0 };
  const reverse = (r: Run, lossRatio: number) => ({ ...r.flows[0]!, direction: 'reverse' as const, udp: { ...lossless, received: 1000 * (1 - lossRatio), lost: 1000 * lossRatio, lossRatio }, bottleneck: bottleneck('receiver socket buffer') });
  const bidirRuns = runs.map((r) => ({ ...r, flows: [{ ...r.flows[0]!, udp: lossless, bottleneck: bottleneck('link') }, reverse(r, 0.4)] }));
  const bidirJob = { ...job, spec: { ...spec, direction: 'bidir' } } as Job;
  const bidirReport = buildReport(bidirJob, bidirRuns);
  const bidir = bidirReport.matrix![0]!.cells.flat().filter((c) => c !== null);
  assert.deepEqual(bidir.map((c) => [c!.lossRatio!.toFixed(6), c!.bottleneck?.verdict, c!.direction]), [['0.400000', 'receiver socket buffer', 'reverse'], ['0.400000', 'receiver socket buffer', 'reverse']]);
  assert.match(reportTable(bidirJob, bidirRuns, bidirReport), /200\.00 40\.00% \[receiver socket buffer, reverse\]/);
  // Both directions lossless: the one something limited is the cell's, not the first leg's none.
  const quiet = runs.map((r) => ({ ...r, flows: [{ ...r.flows[0]!, udp: lossless, bottleneck: { ...bottleneck('link'), verdict: 'none' as const } }, { ...reverse(r, 0), bottleneck: bottleneck('link') }] }));
  const quietCell = buildReport(bidirJob, quiet).matrix![0]!.cells.flat().find((c) => c !== null)!;
  assert.deepEqual([quietCell.lossRatio, quietCell.bottleneck?.verdict, quietCell.direction], [0, 'link', 'reverse']);
  const tcp = buildReport({ ...job, spec: { ...spec, protocol: 'tcp' } } as Job, runs.map((r) => ({ ...r, flows: [{ ...r.flows[0]!, udp: null, bottleneck: null }] })));
  assert.equal(tcp.matrix![0]!.cells[0]![1]!.lossRatio, null);
  assert.equal(tcp.matrix![0]!.cells[0]![1]!.bottleneck, null);
  assert.equal(tcp.matrix![0]!.cells[0]![1]!.direction, null, 'no loss and no verdict: no direction either');
});

test('niclab run --mesh LABELS:INTERFACE (or :PREFIX) asks for a mesh group; it excludes --from/--to', () => {
  assert.deepEqual(specOf({ mesh: 'rack=a,role=lab:eth1', t: '5' }).flows, { shape: 'mesh', members: { labels: { rack: 'a', role: 'lab' }, interface: 'eth1' } });
  assert.deepEqual(specOf({ mesh: 'rack=b:198.18.1.0/24' }).flows, { shape: 'mesh', members: { labels: { rack: 'b' }, prefix: '198.18.1.0/24' } });
  assert.throws(() => specOf({ mesh: 'rack=a', t: '5' }), /LABELS:INTERFACE/);
  assert.throws(() => specOf({ mesh: 'rack=a:eth1', from: ['A:eth1'] }), /excludes --from/);
});

test('niclab run --disjoint A --disjoint B and --star CENTER --star MEMBERS [--star-direction] ask for those groups; one group at a time', () => {
  const a = { labels: { rack: 'a' }, interface: 'eth1' };
  const b = { labels: { rack: 'b' }, prefix: '198.18.2.0/24' };
  assert.deepEqual(specOf({ disjoint: ['rack=a:eth1', 'rack=b:198.18.2.0/24'] }).flows, { shape: 'disjoint', a, b });
  assert.deepEqual(specOf({ star: ['rack=a:eth1', 'rack=b:198.18.2.0/24'] }).flows, { shape: 'star', center: a, members: b, starDirection: 'both' });
  assert.deepEqual(specOf({ star: ['rack=a:eth1', 'rack=b:198.18.2.0/24'], 'star-direction': 'to' }).flows, { shape: 'star', center: a, members: b, starDirection: 'to' });
  assert.throws(() => specOf({ disjoint: ['rack=a:eth1'] }), /--disjoint is given twice: side a, then side b/);
  assert.throws(() => specOf({ star: ['rack=a:eth1', 'rack=b:eth1', 'rack=c:eth1'] }), /the center, then the members.*got 3/);
  assert.throws(() => specOf({ mesh: 'rack=a:eth1', star: ['rack=a:eth1', 'rack=b:eth1'] }), /--mesh and --star exclude each other/);
  assert.throws(() => specOf({ disjoint: ['rack=a:eth1', 'rack=b:eth1'], to: ['B:eth1'] }), /--disjoint excludes --from and --to/);
  assert.throws(() => specOf({ mesh: 'rack=a:eth1', 'star-direction': 'to' }), /applies to --star only/);
  assert.throws(() => specOf({ star: ['rack=a:eth1', 'rack=b:eth1'], 'star-direction': 'up' }), /not to, from or both/);
});

test('disjoint a × b with no member on both sides runs in max(|a|, |b|) rounds, the optimum', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 12 }), (na, nb) => {
      const a = Array.from({ length: na }, (_, i) => agent(`a${i + 1}`, { side: 'a' }));
      const b = Array.from({ length: nb }, (_, i) => agent(`b${i + 1}`, { side: 'b' }));
      const { pairs } = expandGroup({ shape: 'disjoint', a: { labels: { side: 'a' }, interface: 'eth1' }, b: { labels: { side: 'b' }, interface: 'eth1' } }, [...a, ...b]);
      const rounds = planRounds(pairs);
      assertValidRounds(pairs, rounds);
      assert.equal(rounds.length, Math.max(na, nb));
    }),
    { numRuns: 100 },
  );
});
