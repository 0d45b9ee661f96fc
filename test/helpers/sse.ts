import assert from 'node:assert/strict';
import type { ApiClient } from './api-client.js';

export interface JobStreamEvent {
  event: string;
  data: any;
  /** The event's `id:` line. */
  id?: string;
}

/**
 * Follows GET /v1/jobs/{id}/events until the API ends the stream (after the final status) and
 * returns every event. Resolves once the stream is open, with the events still to come: the API
 * subscribes before it reads the job, so every status from then on is in the stream. `onEvent`
 * hears each as it comes. With `lastEventId` the stream resumes after that event (Last-Event-ID).
 */
export async function followJob(client: ApiClient, id: string, onEvent?: (event: JobStreamEvent) => void, signal?: AbortSignal, lastEventId?: string): Promise<{ events: Promise<JobStreamEvent[]> }> {
  const headers: Record<string, string> = { ...(client.token ? { authorization: `Bearer ${client.token}` } : {}), ...(lastEventId ? { 'last-event-id': lastEventId } : {}) };
  const res = await fetch(`${client.base}/v1/jobs/${id}/events`, { headers, signal });
  assert.equal(res.status, 200, `GET /v1/jobs/${id}/events`);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const read = async () => {
    const events: JobStreamEvent[] = [];
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body!) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (!event || !data) continue;
        const eventId = /^id: (.*)$/m.exec(block)?.[1];
        events.push({ event, data: JSON.parse(data), ...(eventId ? { id: eventId } : {}) });
        onEvent?.(events.at(-1)!);
      }
    }
    return events;
  };
  return { events: read() };
}

/** The statuses a stream showed, each change once. */
export function statusChanges(events: JobStreamEvent[]): string[] {
  return events.filter((e) => e.event === 'status').map((e) => e.data.status as string).filter((status, i, all) => all[i - 1] !== status);
}
