/**
 * A server-sent-event stream read as its events (the WHATWG framing the API writes: `id:`,
 * `event:` and one `data:` line, a blank line after each; `:` lines are keep-alives), for the
 * command line and the TypeScript client alike.
 */
export interface StreamEvent {
  event: string;
  /** The `data:` line as sent (JSON for the API's events). */
  data: string;
  id?: string;
}

export async function* serverEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<StreamEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      const id = /^id: (.*)$/m.exec(block)?.[1];
      if (event && data) yield { event, data, ...(id ? { id } : {}) };
    }
  }
}
