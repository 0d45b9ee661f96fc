import type { Principal } from './policy.js';
import type { ApiServices } from './services.js';

/** A request after validation against openapi.yaml: defaults applied, query values typed. */
export interface ValidatedRequest {
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
  /** Who is asking (the token's name and scope); `anonymous` with full scope without a policy file. */
  principal: Principal;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** A body sent as it is, not as JSON of `body`; with `encoding`, `body` (its parts in order) is already encoded so. */
  raw?: { contentType: string; text: string } | { contentType: string; body: Buffer[]; encoding: 'gzip' | 'identity' };
  /**
   * Server-sent events: `run` sends events until it resolves (then the response ends) or
   * `closed` aborts (the client went away).
   */
  events?: (send: (event: string, data: unknown) => void, closed: AbortSignal) => Promise<void>;
}

/** Handlers are thin: validated input in, `{status, body}` out, typed errors thrown. */
export type Handler = (request: ValidatedRequest, services: ApiServices) => Promise<Reply>;
