/** /ui: the lab's pages over the public API, routed by the URL's hash (`#/jobs/ID`). */
import { ApiError, token } from './api.js';
import type { Page, PageContext } from './page.js';
import { agentsPage } from './pages/agents.js';
import { changesPage } from './pages/changes.js';
import { comparePage } from './pages/compare.js';
import { jobPage } from './pages/job.js';
import { jobsPage } from './pages/jobs.js';
import { newJobPage } from './pages/new.js';
import { schedulesPage } from './pages/schedules.js';

const PAGES: Record<string, Page> = { jobs: jobsPage, job: jobPage, new: newJobPage, compare: comparePage, agents: agentsPage, schedules: schedulesPage, changes: changesPage };

const main = document.getElementById('page')!;
const notice = document.getElementById('notice')!;
const tokenInput = document.getElementById('token') as HTMLInputElement;

/** What the page says about an API error; a 401 says what to do about the token. */
function showError(error: unknown): void {
  if (error instanceof DOMException && error.name === 'AbortError') return;
  const status = error instanceof ApiError ? error.status : 0;
  let text: string;
  if (status === 401) text = token.get() ? `The token was refused: ${error instanceof Error ? error.message : ''} Enter a valid token above.` : 'This API needs a token: enter it above (it is kept in this tab only).';
  else if (status === 403) text = `Not allowed with this token: ${(error as ApiError).message}`;
  else text = `${status ? `HTTP ${status}: ` : ''}${error instanceof Error ? error.message : String(error)}`;
  notice.textContent = text;
  notice.dataset.status = String(status);
  notice.hidden = false;
}

let leave = new AbortController();

function route(): void {
  leave.abort();
  leave = new AbortController();
  const signal = leave.signal;
  notice.hidden = true;
  delete notice.dataset.status;
  const [path = '', search = ''] = location.hash.replace(/^#\/?/, '').split('?');
  const [name = 'jobs', ...args] = path.split('/').filter(Boolean).map(decodeURIComponent);
  const page = PAGES[name === 'jobs' && args.length ? 'job' : name] ?? jobsPage;
  for (const link of document.querySelectorAll<HTMLAnchorElement>('nav a')) link.classList.toggle('active', link.dataset.page === name);
  const root = document.createElement('div');
  main.replaceChildren(root);
  const context: PageContext = {
    root, args, query: new URLSearchParams(search), signal, fail: showError,
    every(ms, fn) {
      const tick = () => fn().catch(showError);
      void tick();
      const timer = setInterval(tick, ms);
      signal.addEventListener('abort', () => clearInterval(timer));
    },
  };
  page(context).catch(showError);
}

tokenInput.value = token.get();
document.getElementById('token-form')!.addEventListener('submit', (event) => {
  event.preventDefault();
  token.set(tokenInput.value.trim());
  route();
});
document.getElementById('token-forget')!.addEventListener('click', () => {
  tokenInput.value = '';
  token.set('');
  route();
});
window.addEventListener('hashchange', route);
route();
