import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { ValidateFunction } from 'ajv';
import { compileSchema, createAjv, fieldErrors, HTTP_METHODS, loadOpenApi, resolveRef, type OpenApiDocument, type OperationObject, type ParameterObject } from '@niclab/shared/runtime/openapi';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import { admit, isOperationScope, type OperationScope } from './access.js';
import type { Handlers, OperationId, PathParams, QueryParams, Reply, RequestBody, RequestHeaders, ValidatedRequest } from './handler.js';
import type { ApiServices } from './services.js';

/**
 * An operation's validators. Each is compiled from the part of openapi.yaml that the generated
 * type it guards was generated from, so a request that passes has that type.
 */
interface CompiledOperation<Op extends OperationId> {
  operationId: Op;
  scope: OperationScope;
  params: ValidateFunction<PathParams<Op>>;
  headers: ValidateFunction<RequestHeaders<Op>>;
  query: ValidateFunction<QueryParams<Op>>;
  body?: ValidateFunction<RequestBody<Op>>;
  /** Whether no body at all is what the contract allows: it declares none, or an optional one. */
  absentBodyAllowed: (body: unknown) => body is RequestBody<Op>;
}

const JSON_TYPES = ['application/json', 'application/*+json'];

function parameterSchema(parameters: ParameterObject[]) {
  return {
    type: 'object',
    additionalProperties: false,
    properties: Object.fromEntries(parameters.map((p) => [p.name, p.schema])),
    required: parameters.filter((p) => p.required).map((p) => p.name),
  };
}

/**
 * Builds every route from openapi.yaml: the path, the method, the validation of path, query
 * and body, and the handler named by its operationId. A path's other methods answer 405.
 */
export function specRouter(handlers: Handlers, services: ApiServices): Router {
  const { doc } = loadOpenApi();
  const ajv = { query: createAjv({ coerce: true, defaults: true }), body: createAjv({ defaults: true }) };
  const router = express.Router({ strict: true });
  // Only operations that take a body parse one; elsewhere a body is ignored, as HTTP allows.
  const json = express.json({ limit: services.config.bodyLimitBytes, type: JSON_TYPES });
  const parseBody = (req: Request, res: Response) => new Promise<void>((resolve, reject) => json(req, res, (error?: unknown) => (error ? reject(error) : resolve())));
  const handled = (id: string): id is OperationId => Object.hasOwn(handlers, id);

  /** The route of one operation: `handlers[Op]` gets the request typed as `Op`'s. */
  const route = <Op extends OperationId>(path: string, op: CompiledOperation<Op>, hasBody: boolean) => {
    const handler = handlers[op.operationId];
    return async (req: Request, res: Response, next: NextFunction) => {
      res.locals.route = path;
      try {
        // Who is asking is settled before a body is read: an unknown caller's body is never parsed.
        const principal = await admit(services, op.scope, { authorization: req.headers.authorization, address: req.socket.remoteAddress });
        if (hasBody) await parseBody(req, res);
        const request: ValidatedRequest<Op> = { operationId: op.operationId, ...validate(op, req), principal };
        const reply: Reply = await handler(request, services);
        for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
        if (reply.events) await streamEvents(res, reply.events);
        else if (reply.raw && 'text' in reply.raw) res.status(reply.status).type(reply.raw.contentType).send(reply.raw.text);
        else if (reply.raw) {
          // Encoded or not as the request's Accept-Encoding asked: caches must key on it.
          res.status(reply.status).type(reply.raw.contentType).setHeader('Vary', 'Accept-Encoding');
          if (reply.raw.encoding !== 'identity') res.setHeader('Content-Encoding', reply.raw.encoding);
          res.setHeader('Content-Length', reply.raw.body.reduce((sum, part) => sum + part.length, 0));
          res.cork(); // thousands of small parts: one write to the socket, not one each
          for (const part of reply.raw.body) res.write(part);
          res.end();
        }
        else if (reply.body === undefined) res.status(reply.status).end();
        else res.status(reply.status).json(reply.body);
      } catch (error) {
        next(error);
      }
    };
  };

  for (const [path, item] of Object.entries(doc.paths)) {
    const expressPath = path.replace(/\{(\w+)\}/g, ':$1');
    const shared = (item.parameters ?? []).map((p) => resolveRef<ParameterObject>(doc, p));
    const allowed: string[] = [];
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!op) continue;
      allowed.push(method.toUpperCase());
      if (!handled(op.operationId)) throw new Error(`openapi.yaml names operation ${op.operationId}, which has no handler`);
      router[method](expressPath, route(path, compileOperation(op.operationId, op, shared, doc, ajv), op.requestBody !== undefined));
    }
    router.all(expressPath, (_req: Request, res: Response, next: NextFunction) => {
      res.locals.route = path;
      res.setHeader('Allow', allowed.join(', '));
      next(new HttpProblem(405, 'method-not-allowed', `This resource allows ${allowed.join(', ')}.`));
    });
  }
  return router;
}

function compileOperation<Op extends OperationId>(
  operationId: Op,
  op: OperationObject,
  shared: ParameterObject[],
  doc: OpenApiDocument,
  ajv: { query: ReturnType<typeof createAjv>; body: ReturnType<typeof createAjv> },
): CompiledOperation<Op> {
  const parameters = [...shared, ...(op.parameters ?? []).map((p) => resolveRef<ParameterObject>(doc, p))];
  const headerParams = parameters.filter((p) => p.in === 'header').map((p) => ({ ...p, name: p.name.toLowerCase() }));
  const scope = op['x-niclab-scope'];
  if (!isOperationScope(scope)) throw new Error(`openapi.yaml: operation ${operationId} has no x-niclab-scope that this API knows`);
  const bodyRequired = op.requestBody?.required ?? false;
  // Compiled when first used: the job spec's validator alone is about a second of CPU, which
  // every API start paid for every operation before it answered /readyz (over 5 s at load 25).
  const compiled = lazy(() => ({
    headers: compileSchema(ajv.query, { ...parameterSchema(headerParams), additionalProperties: true }),
    params: compileSchema(ajv.query, parameterSchema(parameters.filter((p) => p.in === 'path'))),
    query: compileSchema(ajv.query, parameterSchema(parameters.filter((p) => p.in === 'query'))),
    body: op.requestBody ? compileSchema(ajv.body, op.requestBody.content['application/json']?.schema) : undefined,
  }));
  return {
    operationId,
    scope,
    get headers() {
      return compiled().headers as ValidateFunction<RequestHeaders<Op>>;
    },
    get params() {
      return compiled().params as ValidateFunction<PathParams<Op>>;
    },
    get query() {
      return compiled().query as ValidateFunction<QueryParams<Op>>;
    },
    get body() {
      return compiled().body as ValidateFunction<RequestBody<Op>> | undefined;
    },
    absentBodyAllowed: (body): body is RequestBody<Op> => body === undefined && !bodyRequired,
  };
}

/** `make()`'s value, made on the first call and kept. */
function lazy<T>(make: () => T): () => T {
  let value: { made: T } | undefined;
  return () => (value ??= { made: make() }).made;
}

function validate<Op extends OperationId>(op: CompiledOperation<Op>, req: Request) {
  const params: unknown = { ...req.params };
  const query: unknown = { ...req.query };
  const headers: unknown = { ...req.headers };
  if (!op.params(params)) throw HttpProblem.invalid(fieldErrors(op.params.errors, 'path'));
  if (!op.query(query)) throw HttpProblem.invalid(fieldErrors(op.query.errors, 'query'));
  if (!op.headers(headers)) throw HttpProblem.invalid(fieldErrors(op.headers.errors, 'header'));
  return { params, query, headers, body: readBody(op, req) };
}

function readBody<Op extends OperationId>(op: CompiledOperation<Op>, req: Request): RequestBody<Op> {
  const body: unknown = op.body && req.is(JSON_TYPES) ? req.body : undefined;
  if (op.body && req.is(JSON_TYPES)) {
    if (!op.body(body)) throw HttpProblem.invalid(fieldErrors(op.body.errors, 'body'));
    return body;
  }
  if (op.body && req.headers['content-type'] && (Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'])) {
    throw new HttpProblem(415, 'unsupported-media-type', 'The body must be application/json.');
  }
  if (!op.absentBodyAllowed(body)) throw HttpProblem.invalid([{ field: 'body', message: 'is required (application/json)' }]);
  return body;
}

/** A server-sent-event response: headers at once, a comment every 15 s so proxies keep it open. */
async function streamEvents(res: Response, run: NonNullable<Reply['events']>): Promise<void> {
  res.status(200).set({ 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
  res.flushHeaders();
  const closed = new AbortController();
  res.on('close', () => closed.abort());
  const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
  try {
    await run((event, data, id) => res.write(`${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`), closed.signal);
  } finally {
    clearInterval(keepAlive);
    res.end();
  }
}
