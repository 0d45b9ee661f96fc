import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '@niclab/shared/runtime/logger';
import { HttpProblem, PROBLEM_CONTENT_TYPE, problemBody } from '@niclab/shared/runtime/problem';

/** Errors body-parser raises, by its `type`. */
const PARSER_ERRORS: Record<string, [number, string, string]> = {
  'entity.parse.failed': [400, 'malformed-json', 'The body is not valid JSON.'],
  'entity.too.large': [413, 'too-large', 'The body is larger than this API accepts.'],
  'encoding.unsupported': [415, 'unsupported-media-type', 'The body encoding is not supported.'],
  'charset.unsupported': [415, 'unsupported-media-type', 'The body charset is not supported.'],
  'request.aborted': [400, 'aborted', 'The request was aborted.'],
};

function isRedisDown(error: Error): boolean {
  return error.name === 'MaxRetriesPerRequestError' || /Connection is closed|ECONNREFUSED|Stream isn't writeable/.test(error.message);
}

/** Maps every typed error to problem+json; the only error middleware. */
export function errorMiddleware(log: Logger) {
  return (error: Error & { type?: string; status?: number }, req: Request, res: Response, _next: NextFunction): void => {
    let status: number;
    let slug: string;
    let detail: string;
    let fields: HttpProblem['errors'] = [];
    let rule: string | undefined;
    if (error instanceof HttpProblem) {
      ({ status, slug, errors: fields } = error);
      detail = error.message;
      rule = error.extra.rule;
      for (const [name, value] of Object.entries(error.extra.headers ?? {})) res.setHeader(name, value);
    } else if (error.type && PARSER_ERRORS[error.type]) {
      [status, slug, detail] = PARSER_ERRORS[error.type]!;
      if (error.type === 'entity.parse.failed') detail = `The body is not valid JSON: ${error.message}`;
    } else if (isRedisDown(error)) {
      [status, slug, detail] = [503, 'store-unavailable', 'The job store (Redis) is not reachable; try again shortly.'];
      // A restart or a failover is over in seconds: a client that waits 1 s and sends again gets through.
      res.setHeader('Retry-After', '1');
      log.warn({ err: error, path: req.path }, 'redis unavailable');
    } else {
      [status, slug, detail] = [500, 'internal', 'An internal error occurred; it has been logged.'];
      log.error({ err: error, path: req.path, method: req.method }, 'request failed');
    }
    res.status(status).type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(problemBody(status, slug, detail, fields, req.originalUrl, rule)));
  };
}

export function notFound(req: Request, _res: Response, next: NextFunction): void {
  next(new HttpProblem(404, 'not-found', `There is nothing at ${req.method} ${req.path}.`));
}
