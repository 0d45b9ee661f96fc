import express, { type Express } from 'express';
import { loadOpenApi } from '@niclab/shared/runtime/openapi';
import { docsRouter } from './docs.js';
import { errorMiddleware, notFound } from './errors.js';
import { handlers } from './handlers/index.js';
import { specRouter } from './router.js';
import { uiRouter } from './ui.js';
import type { ApiServices } from './services.js';

/** Builds the API (no listen): JSON body parsing, the routes of openapi.yaml, docs, the /ui page, problem+json errors. */
export function createApp(services: ApiServices): Express {
  const app = express();
  app.disable('x-powered-by');
  // No ETag: hashing every response (a 5 MiB /metrics) costs more than any client saves.
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use((req, res, next) => {
    const t0 = process.hrtime.bigint();
    res.on('finish', () => {
      const route = typeof res.locals.route === 'string' ? res.locals.route : 'unmatched';
      services.metrics.observeRequest(req.method, route, res.statusCode, Number(process.hrtime.bigint() - t0) / 1e9);
    });
    next();
  });
  app.get('/openapi.yaml', (_req, res) => void res.type('application/yaml').send(loadOpenApi().text));
  app.use(docsRouter());
  app.use(uiRouter());
  app.use(specRouter(handlers, services));
  app.use(notFound);
  app.use(errorMiddleware(services.log));
  return app;
}
