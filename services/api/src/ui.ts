import { fileURLToPath } from 'node:url';
import express, { type Response, type Router } from 'express';

// Resolved from src/ (tsx) and dist/ (node) alike: both sit beside ui/ and dist/ui/.
const STATIC = fileURLToPath(new URL('../ui/static/', import.meta.url));
const BUNDLE = fileURLToPath(new URL('../dist/ui/', import.meta.url));

/**
 * The page may talk to this API only: scripts and styles from /ui, data from the API, the
 * charts inlined as SVG (vega writes style attributes, hence inline styles).
 */
const CSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// The files keep their names from one build to the next, so a browser must ask again each
// time (a 304 when unchanged) rather than run an old bundle against a new API.
const revalidate = (res: Response) => void res.set({ 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' });

/** /ui: the web page over the public API, its files served by the API itself (no CDN). */
export function uiRouter(): Router {
  const router = express.Router();
  const options = { index: false, dotfiles: 'ignore' as const, setHeaders: revalidate };
  router.get('/ui', (_req, res) => {
    revalidate(res);
    res.set('Content-Security-Policy', CSP);
    res.sendFile('index.html', { root: STATIC, headers: { 'Content-Type': 'text/html; charset=utf-8' } });
  });
  router.use('/ui/assets', express.static(STATIC, options));
  router.use('/ui/js', express.static(BUNDLE, { ...options, extensions: false }));
  return router;
}
