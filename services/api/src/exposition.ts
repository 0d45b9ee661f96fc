/**
 * The Prometheus text exposition format (0.0.4) of the families in metric-families.ts. Written
 * here rather than by prom-client: a link's nine labels are escaped once and shared by all its
 * series, which keeps a scrape of thousands of links cheap (prom-client formats every label of
 * every series anew).
 *
 * A scrape is a list of pieces (a family, or a family's series of one bucket of links), each
 * kept with its bytes and their deflate while its text stays the same: an unchanged fleet is
 * neither re-rendered nor recompressed, and a link whose result changed costs its bucket only.
 */
import { promisify } from 'node:util';
import { constants, crc32, deflateRaw as deflateRawCallback } from 'node:zlib';
import type { Agent } from '@niclab/shared/domain/contract';
import type { LinkLabels } from '@niclab/shared/stores/metric-store';
import { LINK_FAMILIES, LINK_LABELS, type Family, type Link, type Sample, type Snapshot } from './metric-families.js';

const deflateRaw = promisify(deflateRawCallback);

const NEEDS_ESCAPE = /[\\\n"]/;
export const escapeLabel = (value: string) => (NEEDS_ESCAPE.test(value) ? value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"') : value);
export const sampleValue = (value: number) => (Number.isNaN(value) ? 'NaN' : value === Infinity ? '+Inf' : value === -Infinity ? '-Inf' : String(value));

function labelPairs(labels: Record<string, string>): string {
  let pairs = '';
  for (const key in labels) pairs += `${pairs ? ',' : ''}${key}="${escapeLabel(labels[key]!)}"`;
  return pairs;
}
const header = (family: Pick<Family, 'name' | 'help' | 'type'>) => `# HELP ${family.name} ${family.help}\n# TYPE ${family.name} ${family.type}\n`;

/** One family: its HELP and TYPE lines, then a line per sample. */
export function renderFamily(family: Pick<Family, 'name' | 'help' | 'type'>, samples: Sample[]): string {
  return header(family) + renderSamples(family, samples);
}

/** A line per sample of a family, without its header. */
function renderSamples(family: Pick<Family, 'name'>, samples: Sample[]): string {
  let text = '';
  for (const { labels, value, suffix = '' } of samples) {
    const set = labelPairs(labels);
    text += `${family.name}${suffix}${set ? `{${set}}` : ''} ${sampleValue(value)}\n`;
  }
  return text;
}

/** An agent's lines of a per-agent family, rendered once per family and interfaces array (the same array while the agent's record is). */
const agentLineCache = new Map<string, WeakMap<object, string>>();
function agentLines(family: Family, perAgent: NonNullable<Family['perAgent']>, agent: Agent): string {
  let cache = agentLineCache.get(family.name);
  if (!cache) agentLineCache.set(family.name, (cache = new WeakMap()));
  let lines = cache.get(agent.interfaces);
  if (lines === undefined) {
    lines = renderSamples(family, perAgent(agent));
    cache.set(agent.interfaces, lines);
  }
  return lines;
}

/** A link's label set in the text format, escaped once per labels object (callers keep them between scrapes). */
const labelSets = new WeakMap<LinkLabels, string>();
function linkLabelSet(labels: LinkLabels): string {
  let set = labelSets.get(labels);
  if (set === undefined) {
    set = LINK_LABELS.map((k) => `${k}="${escapeLabel(labels[k])}"`).join(',');
    labelSets.set(labels, set);
  }
  return set;
}

/** A link's series in each link family (LINK_FAMILIES order), rendered once per link object: its values change only with a new object. */
const linkLines = new WeakMap<Link, string[]>();
function linesOf(link: Link): string[] {
  let lines = linkLines.get(link);
  if (lines === undefined) {
    const set = linkLabelSet(link.labels);
    lines = LINK_FAMILIES.map((family) => family.samples(link.values).map(({ labels, value }) => `${family.name}{${set}${labels ? `,${labelPairs(labels)}` : ''}} ${sampleValue(value)}\n`).join(''));
    linkLines.set(link, lines);
  }
  return lines;
}

/** Every link family (LINK_FAMILIES), each with the series of every link that has its figure, in the links' order. */
export function renderLinks(links: Link[]): string {
  return LINK_FAMILIES.map((family, f) => header(family) + links.map((link) => linesOf(link)[f]).join('')).join('');
}

/** A piece of a scrape: its text, its bytes and their CRC-32, and their raw deflate once a gzip scrape asked for it. */
interface Piece {
  readonly text: string;
  readonly bytes: Buffer;
  readonly crc: number;
  deflated?: Promise<Buffer>;
}

const makePiece = (text: string): Piece => {
  const bytes = Buffer.from(text);
  return { text, bytes, crc: crc32(bytes), deflated: undefined };
};

/** Links per bucket, about: a changed link re-renders and recompresses this many links' series. */
const LINKS_PER_BUCKET = 16;
/** A power of two, so that a fleet that grows changes it rarely (each change re-renders every link once). */
const bucketCount = (links: number) => 2 ** Math.min(12, Math.max(0, Math.ceil(Math.log2(Math.max(1, links / LINKS_PER_BUCKET)))));
/** FNV-1a of the label set: where a link's series go, the same from scrape to scrape. */
const linkHashes = new WeakMap<LinkLabels, number>();
function linkHash(labels: LinkLabels): number {
  let hash = linkHashes.get(labels);
  if (hash === undefined) {
    hash = 0x811c9dc5;
    const set = linkLabelSet(labels);
    for (let i = 0; i < set.length; i++) hash = Math.imul(hash ^ set.charCodeAt(i), 0x01000193);
    hash >>>= 0;
    linkHashes.set(labels, hash);
  }
  return hash;
}

/** One scrape's pieces, in the order they are written. */
export class Scrape {
  constructor(private readonly pieces: Piece[]) {}

  text(): string {
    return this.pieces.map((piece) => piece.text).join('');
  }

  /** The text's bytes, piece by piece (a response writes them in turn: no copy of the whole). */
  bytes(): Buffer[] {
    return this.pieces.map((piece) => piece.bytes);
  }

  /**
   * One gzip member whose deflate stream is the pieces' own deflates, each ended by a sync
   * flush (byte-aligned, no final block, no reference to what came before), then an empty
   * final block; its CRC-32 is combined from the pieces'. Only pieces never compressed before
   * are compressed now.
   */
  async gzip(): Promise<Buffer[]> {
    const deflated = await Promise.all(this.pieces.map((piece) => (piece.deflated ??= deflateRaw(piece.bytes, { finishFlush: constants.Z_SYNC_FLUSH }))));
    let crc = 0;
    let length = 0;
    for (const piece of this.pieces) {
      crc = crc32Combine(crc, piece.crc, piece.bytes.length);
      length += piece.bytes.length;
    }
    const trailer = Buffer.alloc(8);
    trailer.writeUInt32LE(crc, 0);
    trailer.writeUInt32LE(length % 2 ** 32, 4);
    return [GZIP_HEADER, ...deflated, FINAL_EMPTY_BLOCK, trailer];
  }
}

/** ID1 ID2, deflate, no flags, no mtime, no extra flags, OS unknown (RFC 1952). */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
/** A fixed-Huffman block with BFINAL set and only its end code (RFC 1951). */
const FINAL_EMPTY_BLOCK = Buffer.from([0x03, 0x00]);

/**
 * Renders scrapes, keeping each piece while its text stays the same. Link buckets are
 * compared by their links (parsed link objects are kept while their values do not change),
 * so an unchanged bucket is not even rendered; every other piece is compared by its text.
 */
export class Exposition {
  private pieces = new Map<string, Piece>();
  private buckets: { members: Link[]; pieces: Piece[] }[] = [];

  /** `own`: this replica's prom-client text; `fleet`: the fleet families, rendered from `snapshot` (its links too). */
  scrape(own: string, fleet: Family[], snapshot: Snapshot): Scrape {
    const next = new Map<string, Piece>();
    const piece = (id: string, text: string) => {
      const known = this.pieces.get(id);
      const kept = known?.text === text ? known : makePiece(text);
      next.set(id, kept);
      return kept;
    };
    const render = (family: Family) => {
      const { perAgent } = family;
      return perAgent ? header(family) + snapshot.agents.map((agent) => agentLines(family, perAgent, agent)).join('') : renderFamily(family, family.samples(snapshot));
    };
    const out = [piece('own', `${own}\n`), ...fleet.map((family) => piece(family.name, render(family)))];
    const buckets = this.linkBuckets(snapshot.links);
    LINK_FAMILIES.forEach((family, f) => out.push(piece(`${family.name}#header`, header(family)), ...buckets.map((bucket) => bucket.pieces[f]!)));
    this.pieces = next;
    return new Scrape(out);
  }

  private linkBuckets(links: Link[]): { members: Link[]; pieces: Piece[] }[] {
    const count = bucketCount(links.length);
    const members: Link[][] = Array.from({ length: count }, () => []);
    for (const link of links) members[linkHash(link.labels) % count]!.push(link);
    const previous = this.buckets.length === count ? this.buckets : [];
    this.buckets = members.map((list, b) => {
      const known = previous[b];
      if (known && known.members.length === list.length && known.members.every((link, i) => link === list[i])) return known;
      return { members: list, pieces: LINK_FAMILIES.map((_, f) => makePiece(list.map((link) => linesOf(link)[f]).join(''))) };
    });
    return this.buckets;
  }
}

// CRC-32 of a concatenation from the parts' CRCs (zlib's crc32_combine, which Node does not expose).
const POLY = 0xedb88320;
/** a(x) b(x) modulo p(x), in CRC-32's reflected bit order; `a` is not zero. */
function multModP(a: number, b: number): number {
  let m = 0x80000000;
  let p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ POLY : b >>> 1;
  }
  return p >>> 0;
}
/** x^(2^k) modulo p(x), for k = 0..31. */
const X2N: number[] = [0x40000000];
for (let k = 1; k < 32; k++) X2N.push(multModP(X2N[k - 1]!, X2N[k - 1]!));
/** x^(n 2^k) modulo p(x). */
function x2nModP(n: number, k: number): number {
  let p = 0x80000000;
  for (; n > 0; n = Math.floor(n / 2), k++) if (n % 2) p = multModP(X2N[k % 32]!, p);
  return p;
}
/** The CRC-32 of A followed by B, from A's CRC, B's CRC and B's length in bytes. */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  return (multModP(x2nModP(lengthB, 3), crcA) ^ crcB) >>> 0;
}
