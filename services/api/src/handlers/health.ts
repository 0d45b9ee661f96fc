import { HttpProblem } from '@niclab/shared/runtime/problem';
import type { Handler } from '../handler.js';

export const getMetrics: Handler = async (_request, { metrics }) => {
  return { status: 200, raw: { contentType: metrics.registry.contentType, text: await metrics.render() } };
};

export const getHealth: Handler = async () => ({ status: 200, body: { status: 'ok' } });

export const getReady: Handler = async (_request, { redis }) => {
  const ping = redis.ping();
  ping.catch(() => undefined);
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timed out after 1 s')), 1000).unref());
  try {
    await Promise.race([ping, timeout]);
  } catch (error) {
    throw new HttpProblem(503, 'not-ready', `Redis is not reachable: ${(error as Error).message}`);
  }
  return { status: 200, body: { status: 'ok', redis: 'reachable' } };
};
