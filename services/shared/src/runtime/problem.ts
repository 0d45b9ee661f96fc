import type { FieldError, Problem } from '../domain/contract.js';

/** The only place an error body is written: every error leaves the API as RFC 9457 problem+json. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** A typed error that the API's error middleware turns into problem+json. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly slug: string,
    message: string,
    readonly errors: FieldError[] = [],
    /** The policy rule broken, and headers to send (WWW-Authenticate, Retry-After). */
    readonly extra: { rule?: string; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'HttpProblem';
  }

  static invalid(errors: FieldError[], message = 'The request is not valid.'): HttpProblem {
    return new HttpProblem(422, 'validation', message, errors);
  }

  static notFound(what: string): HttpProblem {
    return new HttpProblem(404, 'not-found', `${what} was not found.`);
  }
}

export function problemBody(status: number, slug: string, detail: string, errors: FieldError[] = [], instance?: string, rule?: string): Problem {
  const body: Problem = {
    type: `https://niclab.dev/problems/${slug}`,
    title: TITLES[status] ?? 'Error',
    status,
    detail,
  };
  if (instance) body.instance = instance;
  if (rule) body.rule = rule;
  if (errors.length > 0) body.errors = errors;
  return body;
}
