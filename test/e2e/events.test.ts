import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ValidateFunction } from 'ajv';
import { compileSchema, createAjv, loadOpenApi, schemaRef } from '@niclab/shared/runtime/openapi';
import type { ApiClient } from '../helpers/api-client.js';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { followJob, type JobStreamEvent } from '../helpers/sse.js';

/**
 * Every event of real jobs' streams (GET /v1/jobs/{id}/events) against the schema openapi.yaml
 * names for its type: `JobEvent`'s discriminator maps each event name to a component.
 */
let niclab: TestNiclab;
let client: ApiClient;
const lo = { agent: 'ev', interface: 'lo' };

before(async () => {
  niclab = await startNiclab(['ev']);
  client = niclab.client;
});

after(async () => {
  await niclab?.stop();
});

const { doc } = loadOpenApi();
const jobEvent = doc.components.schemas.JobEvent as { oneOf: { $ref: string }[]; discriminator: { propertyName: string; mapping: Record<string, string> } };
const ajv = createAjv();
const validators = new Map<string, ValidateFunction>(
  Object.entries(jobEvent.discriminator.mapping).map(([type, ref]) => [type, compileSchema(ajv, schemaRef(ref.split('/').at(-1)!))]),
);

function assertEvents(label: string, events: JobStreamEvent[]): void {
  assert.ok(events.length > 0, `${label}: the stream had events`);
  for (const { event, data } of events) {
    const validate = validators.get(event);
    assert.ok(validate, `${label}: event "${event}" is one openapi.yaml names (${[...validators.keys()].join(', ')})`);
    assert.equal(data[jobEvent.discriminator.propertyName], event, `${label}: the data's type is the event's name`);
    assert.ok(validate(data), `${label}: ${event} event does not match openapi.yaml: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(data)}`);
  }
}

test('JobEvent names a component for every event type, and the operation refers to it', () => {
  assert.deepEqual(jobEvent.oneOf.map((r) => r.$ref).sort(), Object.values(jobEvent.discriminator.mapping).sort());
  const media = (doc.paths['/v1/jobs/{id}/events'] as any).get.responses['200'].content['text/event-stream'];
  assert.equal(media.schema.contentSchema.$ref, '#/components/schemas/JobEvent');
});

test('every event of a bidir campaign and of a canceled job matches its schema in openapi.yaml', async () => {
  // A bidir flow is two legs, so interval samples come from both; two runs give progress and run events.
  const campaign = await client.submit({ duration: 1, interval: 0.25, repeat: 2, retries: 2, direction: 'bidir', flows: [{ from: lo, to: lo }] });
  assert.equal(campaign.status, 202, JSON.stringify(campaign.body));
  const campaignEvents = await (await followJob(client, campaign.body.id)).events;
  assertEvents('campaign', campaignEvents);
  const seen = new Set(campaignEvents.map((e) => e.event));
  assert.deepEqual([...seen].sort(), Object.keys(jobEvent.discriminator.mapping).sort(), 'the campaign showed every event type');
  assert.deepEqual(new Set(campaignEvents.filter((e) => e.event === 'interval').map((e) => e.data.leg)), new Set([0, 1]));
  assert.equal(campaignEvents.at(-1)!.data.status, 'succeeded');

  // Every event has an id, increasing. Reconnecting with one (Last-Event-ID) resends exactly what
  // the live stream had after it, from the job's backlog: once each, in order, ending with the
  // final status. An id the backlog does not hold starts the stream afresh, at the status now.
  const ids = campaignEvents.map((e) => e.id);
  assert.ok(ids.every((id) => id && /^\d+-\d+$/.test(id)), JSON.stringify(ids));
  const key = (id: string) => id.split('-').map(BigInt);
  assert.ok(ids.slice(1).every((id, i) => { const [a, b] = [key(id!), key(ids[i]!)]; return a[0]! > b[0]! || (a[0] === b[0] && a[1]! > b[1]!); }), `ids increase: ${ids.join(' ')}`);
  for (const k of [0, Math.floor(campaignEvents.length / 2), campaignEvents.length - 2]) {
    const resumed = await (await followJob(client, campaign.body.id, undefined, undefined, campaignEvents[k]!.id)).events;
    assert.deepEqual(resumed, campaignEvents.slice(k + 1), `resumed after event ${k} of ${campaignEvents.length}`);
  }
  const afresh = await (await followJob(client, campaign.body.id, undefined, undefined, '1-0')).events;
  assert.deepEqual(afresh, [{ ...campaignEvents.at(-1)!, event: 'status' }]);
  const badId = await fetch(`${client.base}/v1/jobs/${campaign.body.id}/events`, { headers: { 'last-event-id': 'yesterday' } });
  assert.equal(badId.status, 422);
  assert.match(JSON.stringify(await badId.json()), /last-event-id/i);

  // A canceled job: its final status carries an error, its run (if one ended) a failed summary.
  const long = await client.submit({ duration: 30, flows: [{ from: lo, to: lo }] });
  assert.equal(long.status, 202, JSON.stringify(long.body));
  const stream = await followJob(client, long.body.id);
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
    if ((await client.call('getJob', 'GET', `/v1/jobs/${long.body.id}`)).body.status === 'running') break;
  }
  assert.equal((await client.call('cancelJob', 'DELETE', `/v1/jobs/${long.body.id}`)).status, 202);
  const canceledEvents = await stream.events;
  assertEvents('canceled job', canceledEvents);
  const last = canceledEvents.at(-1)!;
  assert.equal(last.data.status, 'canceled');
});
