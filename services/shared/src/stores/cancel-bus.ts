import type { Redis } from 'ioredis';
import type { ErrorInfo } from '../domain/contract.js';
import type { Keys } from './keys.js';
import { toRunError } from '../domain/run-errors.js';

/** A cancel announcement: a whole job (the API's DELETE), or one abandoned run (the coordinator's). */
export type CancelMessage = ({ jobId: string } | { runId: string }) & ErrorInfo;

/**
 * Cancel announcements to every agent and coordinator, over Redis pub/sub. Only this class
 * writes or parses them.
 */
export class CancelBus {
  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  async publish(message: CancelMessage): Promise<void> {
    await this.redis.publish(this.keys.cancelChannel, JSON.stringify(message));
  }

  /** Subscribes `subscriber` (a connection of its own, which then only listens) and hands each message on. */
  async listen(subscriber: Redis, onMessage: (message: CancelMessage) => void): Promise<void> {
    await subscriber.subscribe(this.keys.cancelChannel);
    subscriber.on('message', (channel: string, text: string) => {
      if (channel !== this.keys.cancelChannel) return;
      const message = parse(text);
      if (message) onMessage(message);
    });
  }
}

function parse(text: string): CancelMessage | null {
  try {
    const value = JSON.parse(text) as Partial<{ jobId: unknown; runId: unknown }>;
    const error = toRunError(value, 'canceled', 'The run was canceled.');
    if (typeof value.jobId === 'string') return { jobId: value.jobId, ...error };
    if (typeof value.runId === 'string') return { runId: value.runId, ...error };
    return null;
  } catch {
    return null; // not ours to read
  }
}
