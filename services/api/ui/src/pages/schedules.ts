import { getJson, sendJson, type Schemas } from '../api.js';
import { h, jobLink, table, when } from '../dom.js';
import type { PageContext } from '../page.js';

type Schedule = Schemas['Schedule'];

const cadence = (s: Schedule): string => (s.cron ? `cron ${s.cron} (${s.timezone ?? 'UTC'})` : `every ${s.everySeconds} s`);

/** A schedule's actions: pause or resume it, delete it (after asking). Each reads the list again. */
function actions(s: Schedule, reload: () => Promise<void>, fail: (e: unknown) => void): HTMLElement {
  const name = encodeURIComponent(s.name);
  const button = (label: string, act: () => Promise<unknown>) => {
    const b = h('button', { type: 'button', 'data-action': label.split(' ')[0]!.toLowerCase() }, label);
    b.addEventListener('click', () => {
      b.disabled = true;
      act().then(reload).catch(fail).finally(() => void (b.disabled = false));
    });
    return b;
  };
  return h('span', { class: 'actions' },
    s.paused ? button(`Resume ${s.name}`, () => sendJson('POST', `/v1/schedules/${name}/resume`)) : button(`Pause ${s.name}`, () => sendJson('POST', `/v1/schedules/${name}/pause`)),
    ' ',
    button(`Delete ${s.name}`, async () => {
      if (confirm(`Delete the schedule ${s.name}? Its jobs stay.`)) await sendJson('DELETE', `/v1/schedules/${name}`);
    }));
}

/** Every schedule with its next firing and its actions, read again every 10 s; new ones are made on #/new. */
export async function schedulesPage({ root, signal, every, fail }: PageContext): Promise<void> {
  const list = h('div');
  root.replaceChildren(h('h1', {}, 'Schedules'), h('p', {}, h('a', { href: '#/new' }, 'New schedule…'), ' (a job spec with a name and a cadence)'), list);
  // Drawn again only when a schedule changed, so a focused button is not taken from under the keyboard.
  let shown = '';
  const load = async () => {
    const { items } = await getJson<{ items: Schedule[] }>('/v1/schedules', signal);
    const now = JSON.stringify(items);
    if (now === shown) return;
    shown = now;
    list.replaceChildren(items.length
      ? table(['name', 'when', 'paused', 'next firing', 'firings', 'skipped', 'last job', 'owner', 'actions'], items.map((s) => [s.name, cadence(s), s.paused ? 'yes' : 'no', when(s.nextFireAt), s.firings, s.skipped, s.lastJobId ? jobLink(s.lastJobId) : '–', s.owner, actions(s, load, fail)]), { id: 'schedules' })
      : h('p', {}, 'No schedules.'));
  };
  every(10_000, load);
}
