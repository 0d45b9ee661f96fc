import { getJson, type Schemas } from '../api.js';
import { h, jobLink, table, when } from '../dom.js';
import type { PageContext } from '../page.js';

type Schedule = Schemas['Schedule'];

const cadence = (s: Schedule): string => (s.cron ? `cron ${s.cron} (${s.timezone ?? 'UTC'})` : `every ${s.everySeconds} s`);

/** Every schedule with its next firing, read again every 10 s. */
export async function schedulesPage({ root, signal, every }: PageContext): Promise<void> {
  const list = h('div');
  root.replaceChildren(h('h1', {}, 'Schedules'), list);
  every(10_000, async () => {
    const { items } = await getJson<{ items: Schedule[] }>('/v1/schedules', signal);
    list.replaceChildren(items.length
      ? table(['name', 'when', 'paused', 'next firing', 'firings', 'skipped', 'last job', 'owner'], items.map((s) => [s.name, cadence(s), s.paused ? 'yes' : 'no', when(s.nextFireAt), s.firings, s.skipped, s.lastJobId ? jobLink(s.lastJobId) : '–', s.owner]), { id: 'schedules' })
      : h('p', {}, 'No schedules.'));
  });
}
