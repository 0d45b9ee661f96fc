/**
 * #/new: submit a job, or create a schedule, from a form. The flows are chosen from the live
 * inventory; the common fields build the JSON spec, which is shown and may be edited before it
 * is sent (an edit shows in the fields it sets): what the textarea holds is what goes to the
 * API. The API's problem details are shown field by field, beside the control the field
 * belongs to. `#/new?from=ID` starts from a stored job's spec (its repeat request).
 */
import { ApiError, getJson, repeatRequest, sendJson, type Job, type Schemas } from '../api.js';
import { h } from '../dom.js';
import type { PageContext } from '../page.js';

type Agent = Schemas['Agent'];
type Endpoint = Schemas['Endpoint'];
type Problem = ApiError['problem'];
type Field = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

/** The form's own controls, by the spec field (or schedule field) each one sets. */
const CONTROLS = {
  engine: { label: 'Engine', options: ['builtin', 'iperf3'] },
  test: { label: 'Test', options: ['stream', 'rr', 'probe'] },
  protocol: { label: 'Protocol', options: ['tcp', 'udp'] },
  direction: { label: 'Direction', options: ['forward', 'reverse', 'bidir'] },
  duration: { label: 'Duration per run (s)', number: { min: '0.5', max: '3600', step: '0.5', value: '10' } },
  repeat: { label: 'Runs (repeat)', number: { min: '1', max: '1000', step: '1', value: '1' } },
  streams: { label: 'Parallel streams', number: { min: '1', max: '128', step: '1', value: '1' } },
  bufferLength: { label: 'Buffer length (B)', number: { min: '1', max: '16777216', step: '1', value: '131072' } },
  'udp.rate.packetsPerSecond': { label: 'UDP rate (datagrams/s)', number: { min: '1', max: '10000000', step: '1', value: '1000' } },
  'udp.packetSize': { label: 'UDP datagram payload (B)', number: { min: '16', max: '65507', step: '1', value: '1472' } },
} as const;
type ControlName = keyof typeof CONTROLS;

const SCHEDULE = {
  name: { label: 'Schedule name', type: 'text', placeholder: 'nightly-a-d' },
  everySeconds: { label: 'Every (s)', type: 'number', placeholder: '3600' },
  cron: { label: 'or cron', type: 'text', placeholder: '0 2 * * *' },
  timezone: { label: 'Time zone (cron)', type: 'text', placeholder: 'UTC' },
} as const;
type ScheduleName = keyof typeof SCHEDULE;

const idOf = (name: string) => `f-${name.replace(/\./g, '-')}`;
const endpointLabel = (e: Endpoint) => `${e.agent}:${e.interface}`;

/** A labelled control with a place for its error, as one block of the form. */
function labelled(id: string, label: string, control: Field): HTMLElement {
  control.id = id;
  control.name = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, h('span', { class: 'field-error', id: `${id}-error` }));
}

function select(options: readonly string[]): HTMLSelectElement {
  return h('select', {}, ...options.map((o) => h('option', { value: o }, o)));
}

function control(name: ControlName): { block: HTMLElement; field: Field } {
  const spec = CONTROLS[name];
  const field = 'options' in spec ? select(spec.options) : h('input', { type: 'number', ...spec.number });
  return { block: labelled(idOf(name), spec.label, field), field };
}

/** Sets a nested field (`udp.rate.packetsPerSecond`) of a plain object. */
function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let at = target;
  for (const part of parts.slice(0, -1)) at = (at[part] ??= {}) as Record<string, unknown>;
  at[parts.at(-1)!] = value;
}

/** Removes a nested field, when its parent is there. */
function unsetPath(target: Record<string, unknown>, path: string): void {
  const parts = path.split('.');
  const parent = parts.length === 1 ? target : getPath(target, parts.slice(0, -1).join('.'));
  if (parent && typeof parent === 'object') delete (parent as Record<string, unknown>)[parts.at(-1)!];
}

function getPath(source: Record<string, unknown>, path: string): unknown {
  return path.split('.').reduce<unknown>((at, part) => (at && typeof at === 'object' ? (at as Record<string, unknown>)[part] : undefined), source);
}

/** The flows fieldset: a row per flow, each end chosen from the inventory's interfaces. */
class FlowRows {
  readonly element = h('fieldset', { id: 'flows' }, h('legend', {}, 'Flows'));
  private readonly rows = h('div');
  private readonly add = h('button', { type: 'button', id: 'flow-add' }, 'Add a flow');
  private ends: (Endpoint & { down: boolean })[] = [];

  constructor(private readonly changed: () => void) {
    this.add.addEventListener('click', () => this.append());
    this.element.append(this.rows, this.add);
  }

  setInventory(agents: Agent[]): void {
    this.ends = agents.flatMap((a) => a.interfaces.map((i) => ({ agent: a.id, interface: i.name, down: i.operstate === 'down' })));
    // Nothing to choose from: say why, rather than offer empty selects (flows can still be typed into the JSON).
    this.add.disabled = this.ends.length === 0;
    if (this.ends.length === 0) this.element.append(h('p', { class: 'hint' }, 'No agent has registered: start one (README, Quick start), then reload this page.'));
  }

  get count(): number {
    return this.rows.children.length;
  }

  /** A flow row; its ends default to the inventory's first interface that is up (or the flow given). */
  append(flow?: { from: Endpoint; to: Endpoint }): void {
    if (!flow && this.ends.length === 0) return;
    const n = this.rows.children.length;
    const end = (side: 'from' | 'to', chosen?: Endpoint) => {
      const field = h('select', {}, ...this.ends.map((e) => h('option', { value: JSON.stringify({ agent: e.agent, interface: e.interface }) }, `${endpointLabel(e)}${e.down ? ' (down)' : ''}`)));
      // A new row starts on the first interface that is not down: one a job can run on.
      const up = this.ends.findIndex((e) => !e.down);
      if (up >= 0) field.selectedIndex = up;
      if (chosen) {
        // A stored flow's end that the inventory no longer lists is still offered, as it was.
        const value = JSON.stringify({ agent: chosen.agent, interface: chosen.interface });
        if (![...field.options].some((o) => o.value === value)) field.append(h('option', { value }, `${endpointLabel(chosen)} (not registered)`));
        field.value = value;
      }
      field.addEventListener('change', this.changed);
      return labelled(`f-flow-${n}-${side}`, `Flow ${n + 1} ${side}`, field);
    };
    const remove = h('button', { type: 'button', class: 'flow-remove' }, `Remove flow ${n + 1}`);
    const row = h('div', { class: 'flow', 'data-flow': String(n) }, end('from', flow?.from), end('to', flow?.to), remove);
    remove.addEventListener('click', () => {
      row.remove();
      this.renumber();
      this.changed();
      this.add.focus(); // the focus was on the button just removed
    });
    this.rows.append(row);
    this.changed();
  }

  /** Rows keep ids and labels by position, so an error on `flows[1]` lands on the second row. */
  private renumber(): void {
    [...this.rows.children].forEach((row, n) => {
      row.setAttribute('data-flow', String(n));
      for (const [side, block] of [['from', row.children[0]], ['to', row.children[1]]] as const) {
        const id = `f-flow-${n}-${side}`;
        block!.querySelector('label')!.setAttribute('for', id);
        block!.querySelector('label')!.textContent = `Flow ${n + 1} ${side}`;
        Object.assign(block!.querySelector('select')!, { id, name: id });
        block!.querySelector('.field-error')!.id = `${id}-error`;
      }
      row.querySelector('.flow-remove')!.textContent = `Remove flow ${n + 1}`;
    });
  }

  replace(flows: { from: Endpoint; to: Endpoint }[]): void {
    this.rows.replaceChildren();
    for (const flow of flows) this.append(flow);
  }

  value(): { from: Endpoint; to: Endpoint }[] {
    return [...this.rows.querySelectorAll<HTMLElement>('.flow')].flatMap((row) => {
      const [from, to] = [...row.querySelectorAll('select')].map((s) => (s.value ? (JSON.parse(s.value) as Endpoint) : null));
      return from && to ? [{ from, to }] : [];
    });
  }
}

/** The problem's fields shown: in the list, and beside each control a field names (else beside the JSON). */
function showProblem(root: HTMLElement, list: HTMLElement, heading: string, errors: NonNullable<Problem['errors']>): void {
  // A control's own description (the JSON's hint) stays beside its error.
  const describe = (el: HTMLElement, note?: string) => {
    const ids = [el.dataset.hint, note].filter(Boolean).join(' ');
    if (ids) el.setAttribute('aria-describedby', ids);
    else el.removeAttribute('aria-describedby');
  };
  for (const el of root.querySelectorAll<HTMLElement>('[aria-invalid]')) {
    el.removeAttribute('aria-invalid');
    describe(el);
  }
  for (const el of root.querySelectorAll('.field-error')) el.textContent = '';
  list.replaceChildren(
    h('p', {}, heading),
    ...(errors.length ? [h('ul', {}, ...errors.map((e) => h('li', { 'data-field': e.field }, h('code', {}, e.field), `: ${e.message}`)))] : []),
  );
  list.hidden = false;
  for (const e of errors) {
    const field = e.field.replace(/^body\./, '').replace(/^spec\./, '');
    const flow = /^flows\[(\d+)\]\.(from|to)/.exec(field);
    const named = flow ? `f-flow-${flow[1]}-${flow[2]}` : Object.keys({ ...CONTROLS, ...SCHEDULE }).filter((c) => field === c || field.startsWith(`${c}.`) || c.startsWith(`${field}.`)).map((c) => (c in SCHEDULE ? `s-${c}` : idOf(c)))[0];
    const target = root.querySelector<HTMLElement>(`#${named ?? 'f-spec'}`) ?? root.querySelector<HTMLElement>('#f-spec')!;
    const note = root.querySelector(`#${target.id}-error`)!;
    note.textContent = [note.textContent, e.message].filter(Boolean).join('; ');
    target.setAttribute('aria-invalid', 'true');
    describe(target, note.id);
  }
  list.focus();
}

/** The schedule's fieldset: a name and a cadence; its button creates the schedule from the same spec. */
function scheduleFields(): { element: HTMLElement; value(): Record<string, unknown> } {
  const fields = Object.fromEntries(Object.entries(SCHEDULE).map(([name, s]) => [name, h('input', { type: s.type, placeholder: s.placeholder, ...(s.type === 'number' ? { min: '1', step: '1' } : {}) })])) as Record<ScheduleName, HTMLInputElement>;
  const element = h('fieldset', { id: 'schedule' }, h('legend', {}, 'Or run it on a schedule'),
    ...Object.entries(fields).map(([name, field]) => labelled(`s-${name}`, SCHEDULE[name as ScheduleName].label, field)),
    h('button', { type: 'submit', id: 'schedule-create', name: 'action', value: 'schedule' }, 'Create schedule'));
  return {
    element,
    value() {
      const every = fields.everySeconds.value.trim();
      return {
        name: fields.name.value.trim(),
        ...(every ? { everySeconds: Number(every) } : {}),
        ...(fields.cron.value.trim() ? { cron: fields.cron.value.trim() } : {}),
        ...(fields.timezone.value.trim() ? { timezone: fields.timezone.value.trim() } : {}),
      };
    },
  };
}

/**
 * The spec with the common fields' values: the JSON as it is (all it holds that no field
 * has: labels, a sweep, a search...), each field's value set in it, an emptied field's
 * removed (the API fills in its default), `udp` only for UDP. A group typed into the JSON
 * stays, unless flows were chosen above.
 */
function specOf(current: Record<string, unknown>, fields: Record<ControlName, Field>, flows: FlowRows): Record<string, unknown> {
  const spec = structuredClone(current);
  for (const name of Object.keys(CONTROLS) as ControlName[]) {
    const field = fields[name];
    if (field.disabled || field.value === '') {
      unsetPath(spec, name);
      continue;
    }
    setPath(spec, name, field instanceof HTMLInputElement ? Number(field.value) : field.value);
  }
  if (fields.protocol.value !== 'udp') delete spec.udp;
  if (flows.count > 0 || !spec.flows || Array.isArray(spec.flows)) spec.flows = flows.value();
  return spec;
}

/** The JSON as an object, or {} when it is not one (yet). */
function parsedObject(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text) as unknown;
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** The form's fields from a spec (a repeat's): what a control can show; the JSON keeps the rest. */
function fillFrom(spec: Record<string, unknown>, fields: Record<ControlName, Field>, flows: FlowRows): void {
  for (const name of Object.keys(CONTROLS) as ControlName[]) {
    const value = getPath(spec, name);
    if (value !== undefined && typeof value !== 'object') fields[name].value = String(value);
  }
  if (Array.isArray(spec.flows)) flows.replace(spec.flows as { from: Endpoint; to: Endpoint }[]);
}

export async function newJobPage({ root, query, signal, fail }: PageContext): Promise<void> {
  const built = Object.fromEntries((Object.keys(CONTROLS) as ControlName[]).map((name) => [name, control(name)])) as Record<ControlName, { block: HTMLElement; field: Field }>;
  const fields = Object.fromEntries(Object.entries(built).map(([name, c]) => [name, c.field])) as Record<ControlName, Field>;
  const json = h('textarea', { rows: '14', cols: '80', spellcheck: 'false' });
  const problems = h('div', { id: 'problems', class: 'problems', role: 'alert', tabindex: '-1' });
  problems.hidden = true;
  const udpOnly = () => {
    for (const name of ['udp.rate.packetsPerSecond', 'udp.packetSize'] as const) fields[name].disabled = fields.protocol.value !== 'udp';
  };
  // While the JSON fills the form in, the form does not write the JSON back (it would drop what it has no field for).
  let filling = false;
  const rewrite = () => {
    udpOnly();
    if (!filling) json.value = JSON.stringify(specOf(parsedObject(json.value), fields, flows), null, 2);
  };
  const fill = (spec: Record<string, unknown>) => {
    filling = true;
    try {
      fillFrom(spec, fields, flows);
      udpOnly();
    } finally {
      filling = false;
    }
  };
  const flows = new FlowRows(rewrite);
  const schedule = scheduleFields();
  const form = h('form', { id: 'new-job', novalidate: '' },
    flows.element,
    h('fieldset', { id: 'common' }, h('legend', {}, 'Common fields'), ...Object.values(built).map((c) => c.block)),
    h('fieldset', { id: 'json' }, h('legend', {}, 'The job spec that is sent'),
      h('p', { class: 'hint', id: 'f-spec-hint' }, 'Changing a field above rewrites it; edit it here for anything else the API takes (see /docs).'),
      labelled('f-spec', 'JSON spec', json)),
    h('p', {}, h('button', { type: 'submit', id: 'job-submit', name: 'action', value: 'job' }, 'Submit job')),
    schedule.element);
  json.dataset.hint = 'f-spec-hint';
  json.setAttribute('aria-describedby', 'f-spec-hint');
  root.replaceChildren(h('h1', {}, 'New job'), problems, form);
  for (const field of Object.values(fields)) field.addEventListener('change', rewrite);
  // An edited JSON shows in the fields it has, so the form never says other than what is sent.
  json.addEventListener('change', () => fill(parsedObject(json.value)));
  onSubmit(form, { json, problems, schedule, fail });

  const agents = (await getJson<{ items: Agent[] }>('/v1/agents', signal)).items;
  flows.setInventory(agents);
  const from = query.get('from');
  if (from) {
    const request = repeatRequest(await getJson<Job>(`/v1/jobs/${encodeURIComponent(from)}`, signal));
    fill(request);
    json.value = JSON.stringify(request, null, 2);
  } else flows.append();
}

/**
 * Submit job, or Create schedule: the button pressed (Enter in a schedule field is the
 * schedule's), the JSON sent as it is, one request at a time; a refusal's fields shown.
 */
function onSubmit(form: HTMLFormElement, { json, problems, schedule, fail }: { json: HTMLTextAreaElement; problems: HTMLElement; schedule: ReturnType<typeof scheduleFields>; fail: (e: unknown) => void }): void {
  const buttons = () => [...form.querySelectorAll<HTMLButtonElement>('button[type=submit]')];
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const focused = document.activeElement;
    const inSchedule = focused instanceof HTMLInputElement && schedule.element.contains(focused);
    const action = inSchedule ? 'schedule' : ((event as SubmitEvent).submitter as HTMLButtonElement | null)?.value ?? 'job';
    let spec: unknown;
    try {
      spec = JSON.parse(json.value);
    } catch (error) {
      return showProblem(form, problems, 'The JSON spec is not JSON.', [{ field: 'spec', message: (error as Error).message }]);
    }
    for (const b of buttons()) b.disabled = true;
    void (async () => {
      try {
        if (action === 'schedule') {
          await sendJson('POST', '/v1/schedules', { ...schedule.value(), spec });
          location.hash = '#/schedules';
        } else {
          const job = await sendJson<Job>('POST', '/v1/jobs', spec);
          location.hash = `#/jobs/${job.id}`;
        }
      } catch (error) {
        // A 401 or 403 is the token's, not a field's: the page's notice says what to do.
        if (!(error instanceof ApiError) || error.status === 401 || error.status === 403) return fail(error);
        const { title, detail, errors } = error.problem;
        showProblem(form, problems, `HTTP ${error.status} ${title ?? 'The request was refused.'}${detail && detail !== title ? `: ${detail}` : ''}`, errors ?? []);
      } finally {
        for (const b of buttons()) b.disabled = false;
      }
    })();
  });
}
