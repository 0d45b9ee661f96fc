import assert from 'node:assert/strict';
import type { ValidateFunction } from 'ajv';
import { compileSchema, createAjv, loadOpenApi, resolveRef, type OperationObject } from '@niclab/shared/runtime/openapi';

const ajv = createAjv();
const cache = new Map<string, ValidateFunction>();

function operation(operationId: string): OperationObject {
  const { doc } = loadOpenApi();
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      if ((op as OperationObject).operationId === operationId) return op as OperationObject;
    }
  }
  throw new Error(`no operation ${operationId}`);
}

/** A response as supertest or the fetch-based clients hand it over; `text` is the body of a non-JSON one. */
interface CheckedResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
  text?: string;
}

function validator(key: string, schema: unknown): ValidateFunction {
  let validate = cache.get(key);
  if (!validate) {
    validate = compileSchema(ajv, schema);
    cache.set(key, validate);
  }
  return validate;
}

function assertMedia(label: string, content: Record<string, { schema: unknown }>, response: CheckedResponse): void {
  const type = (response.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  // The declared media type the response says it is; an operation may declare several (json, csv, text).
  const media = content[type];
  assert.ok(media, `${label}: content type ${response.headers['content-type']} is not one of ${Object.keys(content).join(', ')}`);
  const body = /json/.test(type) ? response.body : (response.text ?? response.body);
  const validate = validator(`${label} ${type}`, media.schema);
  assert.ok(validate(body), `${label} does not match openapi.yaml: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body)?.slice(0, 2000)}`);
}

/** Asserts a response matches what openapi.yaml says `operationId` answers with this status. */
export function assertResponse(operationId: string, response: CheckedResponse): void {
  const { doc } = loadOpenApi();
  const declared = operation(operationId).responses[String(response.status)];
  assert.ok(declared, `${operationId} does not declare status ${response.status}: ${JSON.stringify(response.body)}`);
  const resolved = resolveRef<{ content?: Record<string, { schema: unknown }> }>(doc, declared as { $ref: string });
  if (!resolved.content) return;
  assertMedia(`${operationId} ${response.status}`, resolved.content, response);
}

/**
 * Asserts a response that no operation answers (an unknown path, a method the path does not
 * allow) is the contract's problem+json, with its status in the body.
 */
export function assertProblem(response: CheckedResponse): void {
  const { doc } = loadOpenApi();
  const problem = resolveRef<{ content: Record<string, { schema: unknown }> }>(doc, { $ref: '#/components/responses/Problem' });
  assertMedia(`problem ${response.status}`, problem.content, response);
  assert.equal((response.body as { status?: unknown }).status, response.status, 'the problem names the response status');
}
