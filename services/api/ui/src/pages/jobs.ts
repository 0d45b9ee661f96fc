import { FINAL, flowsOf, getJson, jobEvents, type Job, type Schemas } from '../api.js';
import { findingText, h, jobLink, statusBadge, when } from '../dom.js';
import type { PageContext } from '../page.js';

/** Streams open at once: a browser allows six connections per host, and the page needs some. */
const MAX_FOLLOWED = 4;

const progressText = (p: { runsDone: number; runsTotal: number }) => `${p.runsDone}/${p.runsTotal}`;

function flowsText(job: Job): string {
  const flows = flowsOf(job);
  const first = flows[0];
  const path = first ? `${first.from.agent}:${first.from.interface} → ${first.to.agent}:${first.to.interface}` : '';
  return flows.length > 1 ? `${path} (+${flows.length - 1})` : path;
}

/**
 * Every job, newest first. Unfinished jobs follow their event stream, so a status changes on
 * the page as it changes on the server; the list itself is read again every 5 s for new jobs.
 */
export async function jobsPage({ root, signal, fail, every }: PageContext): Promise<void> {
  const body = h('tbody');
  root.replaceChildren(
    h('h1', {}, 'Jobs'),
    h('table', { id: 'jobs' }, h('thead', {}, h('tr', {}, ...['job', 'status', 'found', 'verdict', 'runs', 'engine', 'protocol', 'flows', 'created', 'owner'].map((c) => h('th', {}, c)))), body),
  );
  const rows = new Map<string, HTMLTableRowElement>();
  const followed = new Set<string>();

  const setStatus = (row: HTMLTableRowElement, status: string, progress: { runsDone: number; runsTotal: number }) => {
    row.cells[1]!.replaceChildren(statusBadge(status));
    row.cells[4]!.textContent = progressText(progress);
  };
  const setFinding = (row: HTMLTableRowElement, finding: Job['finding']) => {
    const { found, verdict, reason } = findingText(finding);
    row.cells[2]!.textContent = found;
    row.cells[3]!.textContent = verdict;
    if (reason) row.cells[3]!.title = reason;
  };

  const follow = async (id: string) => {
    followed.add(id);
    try {
      for await (const event of jobEvents(id, signal)) {
        const row = rows.get(id);
        if (!row) continue;
        if (event.type === 'status') {
          setStatus(row, event.status, event.progress);
          // What it found is the job's once it ended: read it then, not at the next 5 s poll.
          if (FINAL.includes(event.status)) setFinding(row, (await getJson<Job>(`/v1/jobs/${encodeURIComponent(id)}`, signal)).finding);
        } else if (event.type === 'progress') row.cells[4]!.textContent = progressText(event);
      }
    } catch (error) {
      fail(error);
    } finally {
      followed.delete(id);
    }
  };

  every(5000, async () => {
    const page = await getJson<Schemas['JobPage']>('/v1/jobs?limit=50', signal);
    for (const job of [...page.items].reverse()) {
      let row = rows.get(job.id);
      if (!row) {
        row = h('tr', { 'data-job': job.id }, h('td', {}, jobLink(job.id)), h('td'), h('td', { class: 'found' }), h('td', { class: 'verdict' }), h('td'), h('td', {}, job.spec.engine), h('td', {}, job.spec.protocol), h('td', {}, flowsText(job)), h('td', {}, when(job.createdAt)), h('td', {}, job.owner));
        rows.set(job.id, row);
        body.prepend(row);
      }
      // A followed job's row is its stream's to update; the others take the list's values.
      if (!followed.has(job.id)) {
        setStatus(row, job.status, job.progress);
        setFinding(row, job.finding);
      }
      if (!FINAL.includes(job.status) && !followed.has(job.id) && followed.size < MAX_FOLLOWED) void follow(job.id);
    }
  });
}
