import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';
import type { FieldError } from '../domain/contract.js';

// ajv-formats is CommonJS; its default export arrives one level down under NodeNext.
type AddFormats = (ajv: Ajv2020) => Ajv2020;
const addFormats = ((addFormatsModule as unknown as { default?: AddFormats }).default ?? addFormatsModule) as unknown as AddFormats;

/** openapi.yaml at the repository (or image) root: src/runtime/ and dist/runtime/ are both four levels down. */
export const OPENAPI_PATH = fileURLToPath(new URL('../../../../openapi.yaml', import.meta.url));

export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, PathItemObject>;
  components: { schemas: Record<string, unknown>; parameters?: Record<string, ParameterObject> };
}

export interface ParameterObject {
  name: string;
  in: 'query' | 'path' | 'header' | 'cookie';
  required?: boolean;
  schema: unknown;
  $ref?: string;
}

export interface OperationObject {
  operationId: string;
  parameters?: ParameterObject[];
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<string, unknown>;
  /** Specification extensions, such as `x-niclab-scope`: whoever reads one checks it. */
  [extension: `x-${string}`]: unknown;
}

export const HTTP_METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** A path's operations by method, and the parameters they share. */
export type PathItemObject = { parameters?: ParameterObject[] } & { [M in HttpMethod]?: OperationObject };

let cached: { text: string; doc: OpenApiDocument } | undefined;

export function loadOpenApi(): { text: string; doc: OpenApiDocument } {
  if (!cached) {
    const text = readFileSync(OPENAPI_PATH, 'utf8');
    cached = { text, doc: parsedContract(text) };
  }
  return cached;
}

/**
 * The contract parsed, through a JSON copy kept under the YAML's hash in node_modules/.cache
 * beside it (as trusted as the code: not a shared temporary directory another user could
 * write a contract into): parsing the YAML took 0.35 s of CPU at every start of every process
 * (API, agent, coordinator, each CLI command), a fifth of an API's start, and JSON.parse of
 * the same takes milliseconds. A copy is never stale (another text has another hash); where
 * none can be written (a read-only image), every start parses the YAML, as before.
 */
export function parsedContract(text: string, cache = join(dirname(OPENAPI_PATH), 'node_modules', '.cache', 'niclab')): OpenApiDocument {
  const copy = join(cache, `openapi-${createHash('sha256').update(text).digest('hex').slice(0, 16)}.json`);
  try {
    return JSON.parse(readFileSync(copy, 'utf8')) as OpenApiDocument;
  } catch {
    // no copy yet, or a torn one: parse the YAML
  }
  const doc = parse(text) as OpenApiDocument;
  try {
    mkdirSync(cache, { recursive: true });
    const partial = `${copy}.${process.pid}`;
    writeFileSync(partial, JSON.stringify(doc));
    renameSync(partial, copy);
  } catch {
    // nowhere to keep it: the next start parses again
  }
  return doc;
}

const DOC_ID = 'niclab-openapi';

/**
 * An Ajv (JSON Schema 2020-12, which OpenAPI 3.1 uses) that knows the whole document, so
 * `#/components/...` references resolve. `coerce` converts query strings to their types.
 */
export function createAjv(options: { coerce?: boolean; defaults?: boolean } = {}): Ajv2020 {
  const ajv = new Ajv2020({
    strict: false,
    allErrors: true,
    useDefaults: options.defaults ?? false,
    coerceTypes: options.coerce ?? false,
    // Errors carry the schema that failed, so a rule's own sentence (`x-niclab-rule`) can be the message.
    verbose: true,
  });
  addFormats(ajv);
  ajv.addSchema({ ...loadOpenApi().doc, $id: DOC_ID });
  return ajv;
}

/**
 * A validator for `#/components/schemas/NAME` or any inline schema of the document. `T` names
 * the type the schema describes (as Ajv's `compile<T>`), so the validator is its type guard.
 */
export function compileSchema<T = unknown>(ajv: Ajv2020, schema: unknown): ValidateFunction<T> {
  return ajv.compile<T>(rewriteRefs(schema) as object);
}

export function schemaRef(name: string): { $ref: string } {
  return { $ref: `${DOC_ID}#/components/schemas/${name}` };
}

/** Inline schemas use document-relative refs; point them at the registered document. */
function rewriteRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rewriteRefs);
  if (schema && typeof schema === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(schema)) {
      out[key] = key === '$ref' && typeof value === 'string' && value.startsWith('#/') ? `${DOC_ID}${value}` : rewriteRefs(value);
    }
    return out;
  }
  return schema;
}

/** Resolves a `$ref` to a component (parameters are referenced by the operations). */
export function resolveRef<T>(doc: OpenApiDocument, value: T | { $ref: string }): T {
  if (value && typeof value === 'object' && '$ref' in value && typeof value.$ref === 'string') {
    const path = value.$ref.replace(/^#\//, '').split('/');
    let node: unknown = doc;
    for (const part of path) node = (node as Record<string, unknown>)[part];
    return node as T;
  }
  return value as T;
}

/**
 * Turns Ajv's errors into one entry per offending field, e.g. `body.flows[0].from.interface`.
 * A rule between fields (`if`/`then` in openapi.yaml) states its refusal in `x-niclab-rule`.
 */
export function fieldErrors(errors: ErrorObject[] | null | undefined, root: string): FieldError[] {
  const seen = new Set<string>();
  const out: FieldError[] = [];
  for (const error of errors ?? []) {
    // oneOf/anyOf restate their branches' errors; the branch errors name the field better.
    if (error.keyword === 'oneOf' || error.keyword === 'anyOf' || error.keyword === 'if') continue;
    let path = error.instancePath;
    let message = error.message ?? 'is not valid';
    if (error.keyword === 'additionalProperties') {
      path += `/${(error.params as { additionalProperty: string }).additionalProperty}`;
      message = 'is not a known field';
    } else if (error.keyword === 'required') {
      path += `/${(error.params as { missingProperty: string }).missingProperty}`;
      message = 'is required';
    } else if (error.keyword === 'propertyNames') {
      path += `/${(error.params as { propertyName: string }).propertyName}`;
      message = 'is not an allowed name';
    } else if (error.keyword === 'enum') {
      message = `must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    }
    // A name refused inside propertyNames: the error is the name's, not its object's.
    if (error.propertyName !== undefined && error.keyword !== 'propertyNames') path += `/${error.propertyName}`;
    const rule = (error.parentSchema as { 'x-niclab-rule'?: unknown } | undefined)?.['x-niclab-rule'];
    if (typeof rule === 'string') message = rule;
    const field = root + pointerToPath(path);
    const key = `${field}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ field, message });
  }
  return out;
}

function pointerToPath(pointer: string): string {
  if (!pointer) return '';
  return pointer
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part}`))
    .join('');
}
