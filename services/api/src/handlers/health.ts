import { HttpProblem } from '@niclab/shared/runtime/problem';
import type { Handler } from '../handler.js';

/** Whether an Accept-Encoding header allows gzip (Prometheus sends `gzip`): named or `*`, and not with q=0. */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  const codings = new Map<string, number>();
  for (const part of [header ?? ''].flat().join(',').split(',')) {
    const [coding = '', ...params] = part.split(';').map((p) => p.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    if (coding) codings.set(coding, q ? Number(q.slice(2)) : 1);
  }
  const q = codings.get('gzip') ?? codings.get('x-gzip') ?? codings.get('*') ?? 0;
  return q > 0;
}

export const getMetrics: Handler<'getMetrics'> = async ({ headers }, { metrics }) => {
  const encoding = acceptsGzip(headers['accept-encoding']) ? 'gzip' : 'identity';
  return { status: 200, raw: { contentType: metrics.registry.contentType, body: await metrics.scrape(encoding), encoding } };
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
