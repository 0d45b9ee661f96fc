import { HttpProblem } from '@niclab/shared/runtime/problem';
import type { Handler } from '../handler.js';

export const getMetrics: Handler<'getMetrics'> = async (_request, { metrics }) => {
  return { status: 200, raw: { contentType: metrics.registry.contentType, text: await metrics.render() } };
};

export const getHealth: Handler<'getHealth'> = async () => ({ status: 200, body: { status: 'ok' } });

export const getReady: Handler<'getReady'> = async (_request, { redis }) => {
  const ping = redis.ping();
  ping.catch(() => undefined);
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timed out after 1 s')), 1000).unref());
  try {
    await Promise.race([ping, timeout]);
  } catch (error) {
    throw new HttpProblem(503, 'not-ready', `Redis is not reachable: ${error instanceof Error ? error.message : String(error)}`);
  }
  return { status: 200, body: { status: 'ok', redis: 'reachable' } };
};
