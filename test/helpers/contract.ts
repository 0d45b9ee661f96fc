import assert from 'node:assert/strict';
import type { ValidateFunction } from 'ajv';
import { compileSchema, createAjv, loadOpenApi, resolveRef, type OperationObject } from '@niclab/shared/openapi';

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

/** Asserts a response matches what openapi.yaml says `operationId` answers with this status. */
export function assertResponse(operationId: string, response: { status: number; headers: Record<string, string>; body: unknown }): void {
  const { doc } = loadOpenApi();
  const declared = operation(operationId).responses[String(response.status)];
  assert.ok(declared, `${operationId} does not declare status ${response.status}: ${JSON.stringify(response.body)}`);
  const resolved = resolveRef<{ content?: Record<string, { schema: unknown }> }>(doc, declared as { $ref: string });
  const [mediaType, media] = Object.entries(resolved.content ?? {})[0] ?? [];
  if (!mediaType || !media) return;
  assert.match(response.headers['content-type'] ?? '', new RegExp(`^${mediaType.replace('+', '\\+')}`), `${operationId} ${response.status} content type`);
  const key = `${operationId} ${response.status}`;
  let validate = cache.get(key);
  if (!validate) {
    validate = compileSchema(ajv, media.schema);
    cache.set(key, validate);
  }
  assert.ok(validate(response.body), `${key} does not match openapi.yaml: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(response.body).slice(0, 2000)}`);
}
