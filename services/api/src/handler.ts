import type { IncomingHttpHeaders } from 'node:http';
import type { operations } from '@niclab/shared/generated/openapi';
import type { Principal } from './policy.js';
import type { ApiServices } from './services.js';

/** An operationId of openapi.yaml. */
export type OperationId = keyof operations;

/** `T` without `undefined`: what a declared part holds; `never` where the contract has none (`?: never`). */
type Declared<T> = Exclude<T, undefined>;
/** A part the contract does not declare reads as an object with no keys, so using one fails to compile. */
type OrNone<T> = [T] extends [never] ? Record<never, never> : T;
type OperationParameters<Op extends OperationId> = operations[Op]['parameters'];

/** The path parameters, coerced to their schema types (`index: number`). */
export type PathParams<Op extends OperationId> = OrNone<Declared<OperationParameters<Op>['path']>>;
/**
 * The query parameters, coerced. openapi-typescript leaves a parameter with a `default`
 * optional, though Ajv has filled it in by now: read those with `defaulted`.
 */
export type QueryParams<Op extends OperationId> = OrNone<Declared<OperationParameters<Op>['query']>>;
type LowercaseKeys<T> = { [K in keyof T as Lowercase<K & string>]: T[K] };
/** Every header as Node gives it (lower-case names), the declared ones validated. */
export type RequestHeaders<Op extends OperationId> = LowercaseKeys<OrNone<Declared<OperationParameters<Op>['header']>>> & IncomingHttpHeaders;
type JsonOf<T> = T extends { content: { 'application/json': infer Body } } ? Body : never;
/** The JSON body with Ajv's defaults applied; `undefined` when the contract lets it be absent. */
export type RequestBody<Op extends OperationId> = undefined extends operations[Op]['requestBody']
  ? JsonOf<Declared<operations[Op]['requestBody']>> | undefined
  : JsonOf<operations[Op]['requestBody']>;

/** A request after validation against openapi.yaml, typed by the operation it was routed to. */
export interface ValidatedRequest<Op extends OperationId> {
  /** The operation this request was routed to; it also makes `Handler<'a'>` and `Handler<'b'>` distinct types. */
  operationId: Op;
  params: PathParams<Op>;
  query: QueryParams<Op>;
  body: RequestBody<Op>;
  headers: RequestHeaders<Op>;
  /** Who is asking (the token's name and scope); `anonymous` with full scope without a policy file. */
  principal: Principal;
}

/** Server-sent events, as the event hub streams a job's (event-hub.ts). */
export type { EventStream } from './event-hub.js';
import type { EventStream } from './event-hub.js';

/** Whatever any handler may answer: what the router writes out. */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** A body sent as it is, not as JSON of `body`; with `encoding`, `body` (its parts in order) is already encoded so. */
  raw?: { contentType: string; text: string } | { contentType: string; body: Buffer[]; encoding: 'gzip' | 'identity' };
  events?: EventStream;
}

type Responses<Op extends OperationId> = operations[Op]['responses'];
/** 1xx to 3xx: a handler answers these; failures are thrown as HttpProblem and written in one place. */
type Answered<Op extends OperationId> = { [S in keyof Responses<Op>]: S extends number ? (`${S}` extends `${1 | 2 | 3}${string}` ? S : never) : never }[keyof Responses<Op>];
type ContentOf<R> = R extends { content?: infer C } ? Declared<C> : never;
type RawMediaType<C> = Exclude<keyof C, 'text/event-stream'> & string;
/** One way of sending: the other ways are `never`, so a reply cannot mix two. */
type Sending<S, Way extends Partial<Pick<Reply, 'body' | 'raw' | 'events'>>> = { status: S; headers?: Record<string, string> } & Way & { [K in Exclude<'body' | 'raw' | 'events', keyof Way>]?: never };
/** The replies one response of the contract allows: its JSON as `body`, any of its media types as `raw`, its event stream. */
type RepliesFor<S, C> = [C] extends [never]
  ? Sending<S, Record<never, never>>
  :
      | ('application/json' extends keyof C ? Sending<S, { body: C['application/json'] }> : never)
      | ([RawMediaType<C>] extends [never] ? never : Sending<S, { raw: { contentType: RawMediaType<C> | `${RawMediaType<C>}; ${string}` } & ({ text: string } | { body: Buffer[]; encoding: 'gzip' | 'identity' }) }>)
      | ('text/event-stream' extends keyof C ? Sending<S, { events: EventStream }> : never);

/**
 * What a handler of `Op` may answer: a status the contract declares for it with that status's
 * body, so a body the contract does not allow fails to compile.
 */
export type ReplyTo<Op extends OperationId> = Op extends OperationId
  ? { [S in Answered<Op>]: RepliesFor<S, ContentOf<Responses<Op>[S]>> }[Answered<Op>]
  : never;

/** Handlers are thin: validated input in, `{status, body}` out, typed errors thrown. */
export type Handler<Op extends OperationId> = (request: ValidatedRequest<Op>, services: ApiServices) => Promise<ReplyTo<Op>>;

/** One handler per operationId of openapi.yaml, each typed by its own operation. */
export type Handlers = { [Op in OperationId]: Handler<Op> };

/**
 * A query parameter that openapi.yaml gives a `default`. Ajv filled it in; openapi-typescript
 * types every optional parameter as optional regardless. Checked, not cast: if the default
 * leaves the contract, this fails loudly instead of passing `undefined` on.
 */
export function defaulted<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw new Error(`query parameter ${name} has no default in openapi.yaml`);
  return value;
}
