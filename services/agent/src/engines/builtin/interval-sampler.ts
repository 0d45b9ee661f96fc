import { performance } from 'node:perf_hooks';
import type { Interval } from '@niclab/shared/domain/contract';

/** A receiver's throughput every `seconds`, from its first byte to its last. */
export class IntervalSampler {
  private readonly intervals: Interval[] = [];
  private firstAt = 0;
  private sampledAt = 0;
  private sampledBytes = 0;
  private timer: NodeJS.Timeout | undefined;

  /** `bytes` reads the receiver's running byte count; `live` hears each sample as it is taken; `more` adds figures of the moment (a UDP receiver's jitter). */
  constructor(
    private readonly seconds: number,
    private readonly bytes: () => number,
    private readonly live?: (sample: Interval) => void,
    private readonly more?: () => Partial<Interval>,
  ) {}

  /** At the first byte (a performance.now() instant). */
  start(now: number): void {
    this.firstAt = this.sampledAt = now;
    this.timer = setInterval(() => this.sample(performance.now()), this.seconds * 1000);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Stops at the last byte and returns the samples. A trailing sliver (under a tenth of an
   * interval) says nothing about throughput; the totals still count it.
   */
  finish(lastAt: number): Interval[] {
    this.stop();
    if (this.timer && lastAt - this.sampledAt >= this.seconds * 100) this.sample(lastAt);
    return this.intervals;
  }

  private sample(now: number): void {
    const seconds = (now - this.sampledAt) / 1000;
    if (seconds <= 0.001) return;
    const bytes = this.bytes();
    const sample = { start: (this.sampledAt - this.firstAt) / 1000, end: (now - this.firstAt) / 1000, bitsPerSecond: ((bytes - this.sampledBytes) * 8) / seconds, ...this.more?.() };
    this.intervals.push(sample);
    this.live?.(sample);
    this.sampledBytes = bytes;
    this.sampledAt = now;
  }
}
