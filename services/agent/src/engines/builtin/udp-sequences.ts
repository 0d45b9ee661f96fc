/**
 * What a UDP receiver has seen of each stream of its leg: every stream numbers its datagrams
 * from 0, so a number is a duplicate or out of order only within its own stream (as iperf3
 * counts its streams). The counts are the sums over the streams.
 */
export class StreamSequences {
  private readonly seen: Uint8Array[] = [];
  private readonly highest: number[] = [];
  received = 0;
  duplicates = 0;
  outOfOrder = 0;

  /** `streams`: how many the sender sends on; a datagram of any other stream is not of this leg. */
  constructor(private readonly streams: number) {}

  /** Whether (stream, seq) can be a datagram of this leg at all. */
  valid(stream: number, seq: number): boolean {
    return stream < this.streams && Number.isInteger(seq) && seq >= 0;
  }

  /** Counts datagram `seq` of `stream` (valid); false when it is a duplicate. */
  take(stream: number, seq: number): boolean {
    let seen = this.seen[stream] ?? new Uint8Array(1 << 13);
    const byte = Math.floor(seq / 8);
    if (byte >= seen.length) {
      const grown = new Uint8Array(Math.max(seen.length * 2, byte + 1));
      grown.set(seen);
      seen = grown;
    }
    this.seen[stream] = seen;
    const bit = 1 << seq % 8;
    if (seen[byte]! & bit) {
      this.duplicates += 1;
      return false;
    }
    seen[byte]! |= bit;
    this.received += 1;
    if (seq < (this.highest[stream] ?? -1)) this.outOfOrder += 1;
    else this.highest[stream] = seq;
    return true;
  }
}
