import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { ValidateFunction } from 'ajv';
import { compileSchema, createAjv, fieldErrors, HTTP_METHODS, loadOpenApi, resolveRef, type OperationObject, type ParameterObject } from '@niclab/shared/runtime/openapi';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import { admit, type OperationScope } from './access.js';
import type { Handler, Reply } from './handler.js';
import type { ApiServices } from './services.js';

interface CompiledOperation {
  operationId: string;
  scope: OperationScope;
  params?: ValidateFunction;
  headers?: ValidateFunction;
  query?: ValidateFunction;
  body?: ValidateFunction;
  bodyRequired: boolean;
}

const JSON_TYPES = ['application/json', 'application/*+json'];

function parameterSchema(parameters: ParameterObject[]): unknown {
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
export function specRouter(handlers: Record<string, Handler>, services: ApiServices): Router {
  const { doc } = loadOpenApi();
  const queryAjv = createAjv({ coerce: true, defaults: true });
  const bodyAjv = createAjv({ defaults: true });
  const router = express.Router({ strict: true });
  // Only operations that take a body parse one; elsewhere a body is ignored, as HTTP allows.
  const json = express.json({ limit: services.config.bodyLimitBytes, type: JSON_TYPES });
  const parseBody = (req: Request, res: Response) => new Promise<void>((resolve, reject) => json(req, res, (error?: unknown) => (error ? reject(error) : resolve())));

  for (const [path, item] of Object.entries(doc.paths)) {
    const expressPath = path.replace(/\{(\w+)\}/g, ':$1');
    const shared = ((item as { parameters?: ParameterObject[] }).parameters ?? []).map((p) => resolveRef<ParameterObject>(doc, p));
    const allowed: string[] = [];
    for (const method of HTTP_METHODS) {
      const op = item[method] as OperationObject | undefined;
      if (!op) continue;
      allowed.push(method.toUpperCase());
      const handler = handlers[op.operationId];
      if (!handler) throw new Error(`openapi.yaml names operation ${op.operationId}, which has no handler`);
      const parameters = [...shared, ...(op.parameters ?? []).map((p) => resolveRef<ParameterObject>(doc, p))];
      const pathParams = parameters.filter((p) => p.in === 'path');
      const headerParams = parameters.filter((p) => p.in === 'header').map((p) => ({ ...p, name: p.name.toLowerCase() }));
      const scope = (op as { 'x-niclab-scope'?: OperationScope })['x-niclab-scope'];
      if (!scope) throw new Error(`openapi.yaml: operation ${op.operationId} has no x-niclab-scope`);
      const compiled: CompiledOperation = {
        operationId: op.operationId,
        scope,
        headers: headerParams.length ? compileSchema(queryAjv, { ...(parameterSchema(headerParams) as object), additionalProperties: true }) : undefined,
        params: pathParams.length ? compileSchema(queryAjv, parameterSchema(pathParams)) : undefined,
        query: compileSchema(queryAjv, parameterSchema(parameters.filter((p) => p.in === 'query'))),
        body: op.requestBody ? compileSchema(bodyAjv, op.requestBody.content['application/json']?.schema) : undefined,
        bodyRequired: op.requestBody?.required ?? false,
      };
      router[method](expressPath, async (req: Request, res: Response, next: NextFunction) => {
        res.locals.route = path;
        try {
          // Who is asking is settled before a body is read: an unknown caller's body is never parsed.
          const principal = await admit(services, compiled.scope, { authorization: req.headers.authorization, address: req.socket.remoteAddress });
          if (op.requestBody) await parseBody(req, res);
          const reply = await handler({ ...validate(compiled, req), principal }, services);
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
      });
    }
    router.all(expressPath, (_req: Request, res: Response, next: NextFunction) => {
      res.locals.route = path;
      res.setHeader('Allow', allowed.join(', '));
      next(new HttpProblem(405, 'method-not-allowed', `This resource allows ${allowed.join(', ')}.`));
    });
  }
  return router;
}

function validate(op: CompiledOperation, req: Request) {
  const params = { ...req.params } as Record<string, string>;
  const query: Record<string, unknown> = { ...(req.query as Record<string, unknown>) };
  if (op.params && !op.params(params)) throw HttpProblem.invalid(fieldErrors(op.params.errors, 'path'));
  if (op.query && !op.query(query)) throw HttpProblem.invalid(fieldErrors(op.query.errors, 'query'));
  if (op.headers && !op.headers({ ...req.headers })) throw HttpProblem.invalid(fieldErrors(op.headers.errors, 'header'));
  let body: unknown;
  if (op.body) {
    if (!req.is(JSON_TYPES)) {
      if (req.headers['content-type'] && (Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'])) {
        throw new HttpProblem(415, 'unsupported-media-type', 'The body must be application/json.');
      }
      if (op.bodyRequired) throw HttpProblem.invalid([{ field: 'body', message: 'is required (application/json)' }]);
    } else {
      body = req.body;
      if (!op.body(body)) throw HttpProblem.invalid(fieldErrors(op.body.errors, 'body'));
    }
  }
  return { params, query, body, headers: req.headers };
}

/** A server-sent-event response: headers at once, a comment every 15 s so proxies keep it open. */
async function streamEvents(res: Response, run: NonNullable<Reply['events']>): Promise<void> {
  res.status(200).set({ 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
  res.flushHeaders();
  const closed = new AbortController();
  res.on('close', () => closed.abort());
  const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
  try {
    await run((event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`), closed.signal);
  } finally {
    clearInterval(keepAlive);
    res.end();
  }
}
