import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import express, { type Router } from 'express';

const swaggerUi = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

const PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>niclab API</title><link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>`;

const INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.yaml', dom_id: '#ui', deepLinking: true });`;

/** /docs: the API reference, rendered from /openapi.yaml by swagger-ui-dist, with no CDN. */
export function docsRouter(): Router {
  const router = express.Router();
  router.get('/docs', (_req, res) => void res.type('html').send(PAGE));
  router.get('/docs/init.js', (_req, res) => void res.type('js').send(INIT));
  router.use('/docs/assets', express.static(swaggerUi, { index: false }));
  return router;
}
