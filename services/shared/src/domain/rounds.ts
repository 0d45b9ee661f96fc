/**
 * Pairs into rounds, as a round-robin tournament: no interface is in two pairs of one round,
 * so a round's runs go in parallel without sharing an interface; rounds go in sequence.
 *
 * Bounds reached (Δ = the most pairs at one interface, a lower bound for any plan):
 * - a complete mesh of N interfaces (every ordered pair): 2(N−1) rounds for even N, 2N for odd
 *   N, by the circle method. Both are optimal: a round holds at most ⌊N/2⌋ of the N(N−1) pairs.
 * - disjoint a × b (no member on both sides): max(|a|, |b|) = Δ rounds, optimal (first fit
 *   in diagonal order).
 * - any other set of pairs (a star, a mesh with members missing, overlapping sides): first
 *   fit, at most 2Δ−1 rounds, since a pair conflicts with at most 2(Δ−1) others. A star is exactly Δ.
 */
import type { Endpoint, FlowSpec } from './contract.js';

const endpointKey = (e: Endpoint) => `${e.agent}\u0000${e.interface}`;
const pairKey = (p: FlowSpec) => `${endpointKey(p.from)}\u0001${endpointKey(p.to)}`;

/** The most pairs at one interface: no plan has fewer rounds. */
export function maxDegree(pairs: readonly FlowSpec[]): number {
  const degree = new Map<string, number>();
  for (const p of pairs) for (const e of [p.from, p.to]) degree.set(endpointKey(e), (degree.get(endpointKey(e)) ?? 0) + 1);
  return Math.max(0, ...degree.values());
}

/** The endpoints of a complete ordered mesh (every ordered pair exactly once), else null. */
function completeMesh(pairs: readonly FlowSpec[]): string[] | null {
  const nodes = [...new Set(pairs.flatMap((p) => [endpointKey(p.from), endpointKey(p.to)]))];
  if (nodes.length < 2 || pairs.length !== nodes.length * (nodes.length - 1)) return null;
  const keys = new Set(pairs.map(pairKey));
  if (keys.size !== pairs.length || pairs.some((p) => endpointKey(p.from) === endpointKey(p.to))) return null;
  return nodes;
}

/** The circle method: one node fixed, the others rotate; each round's forward pairs, then the same rounds reversed. */
function circleRounds(nodes: string[], pairs: readonly FlowSpec[]): number[][] {
  const index = new Map(pairs.map((p, i) => [pairKey(p), i]));
  const ring: (string | null)[] = nodes.length % 2 === 0 ? [...nodes] : [...nodes, null];
  const m = ring.length;
  const forward: number[][] = [];
  const reverse: number[][] = [];
  for (let r = 0; r < m - 1; r++) {
    const order = [ring[0]!, ...Array.from({ length: m - 1 }, (_, i) => ring[1 + ((i + r) % (m - 1))]!)];
    const there: number[] = [];
    const back: number[] = [];
    for (let i = 0; i < m / 2; i++) {
      const a = order[i];
      const b = order[m - 1 - i];
      if (a === null || b === null) continue;
      there.push(index.get(`${a}\u0001${b}`)!);
      back.push(index.get(`${b}\u0001${a}`)!);
    }
    forward.push(there);
    reverse.push(back);
  }
  return [...forward, ...reverse].map((round) => round.sort((x, y) => x - y));
}

/** First fit: each pair in the earliest round where neither of its interfaces is busy. */
function firstFit(pairs: readonly FlowSpec[]): number[][] {
  const rounds: number[][] = [];
  const busy = new Map<string, Set<number>>();
  const busyAt = (e: Endpoint) => busy.get(endpointKey(e)) ?? busy.set(endpointKey(e), new Set()).get(endpointKey(e))!;
  pairs.forEach((pair, i) => {
    const from = busyAt(pair.from);
    const to = busyAt(pair.to);
    let r = 0;
    while (from.has(r) || to.has(r)) r++;
    from.add(r);
    to.add(r);
    (rounds[r] ??= []).push(i);
  });
  return rounds;
}

/**
 * The pairs by diagonal, the order of a Latin square: pair (i, j) of the i-th source and the
 * j-th destination on diagonal (i + j) mod max(sources, destinations). First fit in this order
 * plans a × b (disjoint sources and destinations) in exactly max(|a|, |b|) rounds.
 */
function diagonalOrder(pairs: readonly FlowSpec[]): number[] {
  const froms = new Map<string, number>();
  const tos = new Map<string, number>();
  for (const p of pairs) {
    if (!froms.has(endpointKey(p.from))) froms.set(endpointKey(p.from), froms.size);
    if (!tos.has(endpointKey(p.to))) tos.set(endpointKey(p.to), tos.size);
  }
  const width = Math.max(froms.size, tos.size);
  const diagonal = (p: FlowSpec) => (froms.get(endpointKey(p.from))! + tos.get(endpointKey(p.to))!) % width;
  return pairs.map((_, i) => i).sort((x, y) => diagonal(pairs[x]!) - diagonal(pairs[y]!) || x - y);
}

/** The pairs' indexes by round (see the bounds above): for other sets, the better of first fit in the given and in diagonal order. */
export function planRounds(pairs: readonly FlowSpec[]): number[][] {
  if (pairs.length === 0) return [];
  const mesh = completeMesh(pairs);
  if (mesh) return circleRounds(mesh, pairs);
  const given = firstFit(pairs);
  const order = diagonalOrder(pairs);
  const diagonal = firstFit(order.map((i) => pairs[i]!)).map((round) => round.map((k) => order[k]!).sort((x, y) => x - y));
  return diagonal.length < given.length ? diagonal : given;
}
