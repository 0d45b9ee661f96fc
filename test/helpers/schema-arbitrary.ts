import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import type { OpenApiDocument } from '@niclab/shared/runtime/openapi';

type Schema = Record<string, any> | boolean;

/**
 * Draws a value where the schema says where, to be kept when openapi.yaml's validator accepts
 * it: a property by its name (`timezone`), a component by its reference (`#/components/schemas/Endpoint`).
 */
export type Overrides = Record<string, (generic: fc.Arbitrary<unknown>) => fc.Arbitrary<unknown>>;

/** What a property's override draws to leave the property out of its object (as if fc.record had not drawn it). */
export const ABSENT = Symbol('absent');

export interface ArbitraryOptions {
  overrides?: Overrides;
  /** Arrays and maps are drawn with at most this many items (within the schema's bounds). */
  maxItems?: number;
}

/**
 * A fast-check arbitrary for the values a JSON Schema (the 2020-12 subset openapi.yaml uses)
 * describes: type, properties, items, enum, const, oneOf, patterns, bounds, and an object's
 * `allOf` of `if`/`then`/`else` rules. For those it draws the object, fixes the fields its
 * `if`s read, and draws the rest again from the properties narrowed by the branches that apply
 * (a property a branch forbids with `not: {}` is left out). Filter what it draws through the
 * contract's own validator: the generator only makes valid values likely.
 */
export function schemaArbitrary(doc: OpenApiDocument, schema: unknown, options: ArbitraryOptions = {}): fc.Arbitrary<unknown> {
  const overrides = options.overrides ?? {};
  const maxItems = options.maxItems ?? 3;
  const cache = new Map<string, fc.Arbitrary<unknown>>();

  const resolve = (ref: string): Schema => {
    let node: any = doc;
    for (const part of ref.replace(/^#\//, '').split('/')) node = node[part];
    return node as Schema;
  };

  const build = (node: Schema): fc.Arbitrary<unknown> => {
    if (node === true) return fc.jsonValue({ maxDepth: 1 });
    if (node === false) throw new Error('a false schema has no values');
    if (node.$ref) {
      const ref = node.$ref as string;
      if (!cache.has(ref)) {
        let built: fc.Arbitrary<unknown> | undefined;
        // Built when first drawn from, once: a component may refer to itself.
        const generic = fc.constant(null).chain(() => (built ??= build(resolve(ref))));
        cache.set(ref, overrides[ref] ? overrides[ref](generic) : generic);
      }
      return cache.get(ref)!;
    }
    if ('const' in node) return fc.constant(node.const);
    if (node.enum) return fc.constantFrom(...(node.enum as unknown[]));
    if (node.oneOf || node.anyOf) return fc.oneof(...((node.oneOf ?? node.anyOf) as Schema[]).map(build));
    if (Array.isArray(node.type)) return fc.oneof(...node.type.map((type: string) => build({ ...node, type })));
    switch (node.type) {
      case 'null': return fc.constant(null);
      case 'boolean': return fc.boolean();
      case 'integer': return integer(node);
      case 'number': return integerMin(node) <= Math.floor(node.maximum ?? 1e6)
        ? fc.oneof(integer(node), number(node))
        : number(node);
      case 'string': return string(node);
      case 'array': {
        const min = node.minItems ?? 0;
        return fc.array(build(node.items ?? true), { minLength: min, maxLength: Math.max(min, Math.min(node.maxItems ?? maxItems, maxItems)) });
      }
      case 'object': return object(node);
      default: return fc.jsonValue({ maxDepth: 1 });
    }
  };

  /** The least whole number a schema allows (0.1 < x: 1; 0 < x <= 0.5 allows none). */
  const integerMin = (node: Record<string, any>) => Math.ceil(node.exclusiveMinimum !== undefined ? node.exclusiveMinimum + 1e-9 : (node.minimum ?? -1e6));

  const integer = (node: Record<string, any>) => {
    const min = integerMin(node);
    const max = Math.floor(node.maximum ?? 1e6);
    // Small values as often as large: a sweep of big numbers is mostly over the run cap.
    return fc.oneof(fc.integer({ min, max: Math.min(max, min + 10) }), fc.integer({ min, max }));
  };

  const number = (node: Record<string, any>) => fc.double({
    min: node.exclusiveMinimum ?? node.minimum ?? -1e6,
    minExcluded: node.exclusiveMinimum !== undefined,
    max: node.maximum ?? 1e6,
    noNaN: true,
    noDefaultInfinity: true,
  });

  // A pattern's arbitrary is costly to build; a rule's branch builds its object again on every draw.
  const patterns = new Map<string, fc.Arbitrary<string>>();
  const string = (node: Record<string, any>) => {
    const minLength = node.minLength ?? 0;
    const maxLength = node.maxLength ?? 64;
    if (!node.pattern) return fc.string({ minLength, maxLength: Math.min(maxLength, 64) });
    const key = `${minLength} ${maxLength} ${node.pattern}`;
    if (!patterns.has(key)) {
      patterns.set(key, fc.stringMatching(new RegExp(node.pattern as string), { size: 'xsmall' }).filter((s) => s.length >= minLength && s.length <= maxLength));
    }
    return patterns.get(key)!;
  };

  const object = (node: Record<string, any>): fc.Arbitrary<unknown> => {
    const rules = ((node.allOf ?? []) as Record<string, any>[]).filter((rule) => rule.if);
    if (rules.length > 0) {
      const { allOf: _, ...base } = node;
      const read = [...new Set(rules.flatMap((rule) => [...(rule.if.required ?? []), ...Object.keys(rule.if.properties ?? {})]))] as string[];
      // Per combination of the branches that apply: the narrowed schema and the arbitrary for the
      // fields the rules do not read, built once (built per draw, a JobSpec took 45 ms a value).
      const narrowings = new Map<string, { narrowed: Record<string, any>; rest: fc.Arbitrary<unknown> }>();
      const narrowing = (applies: boolean[]) => {
        const key = applies.map(Number).join('');
        if (!narrowings.has(key)) {
          let narrowed: Record<string, any> = base;
          rules.forEach((rule, i) => {
            const branch = applies[i] ? rule.then : rule.else;
            if (branch) narrowed = merge(narrowed, branch);
          });
          const properties = { ...narrowed.properties };
          for (const name of read) delete properties[name];
          const required = (narrowed.required ?? []).filter((name: string) => !read.includes(name));
          narrowings.set(key, { narrowed, rest: object(forbid({ ...narrowed, properties, required })) });
        }
        return narrowings.get(key)!;
      };
      return object(base).chain((drawn): fc.Arbitrary<unknown> => {
        const value = drawn as Record<string, unknown>;
        const { narrowed, rest } = narrowing(rules.map((rule) => holds(rule.if, value)));
        // A branch may refuse what the drawn fields are (test rr with protocol udp): draw again.
        for (const name of read) {
          const sub = narrowed.properties?.[name];
          const present = name in value;
          if (!present && (narrowed.required ?? []).includes(name)) return fc.constant(CONFLICT);
          if (present && sub && !holds(withComponents(sub.$ref ? resolve(sub.$ref) : sub), value[name])) return fc.constant(CONFLICT);
        }
        // The fields the rules read keep their drawn values (or stay absent), so the same branches apply.
        const kept = Object.fromEntries(read.filter((name) => name in value).map((name) => [name, value[name]]));
        return rest.map((other) => ({ ...(other as Record<string, unknown>), ...kept }));
      }).filter((value) => value !== CONFLICT);
    }
    const properties = (node.properties ?? {}) as Record<string, Schema>;
    // A request never carries what the server sets (`readOnly`): the validator refuses it.
    const names = Object.keys(properties).filter((name) => (properties[name] as Record<string, unknown>).readOnly !== true);
    if (names.length > 0) {
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const name of names) {
        const generic = build(properties[name]!);
        model[name] = overrides[name] ? overrides[name](generic) : generic;
      }
      return fc.record(model, { requiredKeys: (node.required ?? []) as string[] }).map((value) => Object.fromEntries(Object.entries(value).filter(([, v]) => v !== ABSENT)));
    }
    if (node.additionalProperties && typeof node.additionalProperties === 'object') {
      const keys = node.propertyNames ? build({ type: 'string', ...node.propertyNames }) : fc.string({ maxLength: 16 });
      const limit = Math.min(node.maxProperties ?? maxItems, maxItems);
      return fc.dictionary(keys as fc.Arbitrary<string>, build(node.additionalProperties), { maxKeys: limit, noNullPrototype: true });
    }
    return fc.constant({});
  };

  /** A branch that refers to components (a search's rates) carries them, so its references resolve. */
  const carried = new WeakMap<object, Schema>();
  const withComponents = (node: Schema): Schema => {
    if (typeof node !== 'object' || node === null) return node;
    if (!carried.has(node)) {
      const text = JSON.stringify(node);
      const full = text.includes('"$ref"') ? { ...node, components: doc.components } : node;
      // The components are the same for every branch: the branch's own text keys its validator.
      if (full !== node) schemaKeys.set(full, `with components ${text}`);
      carried.set(node, full);
    }
    return carried.get(node)!;
  };

  /** Two schemas as one, for the keywords the contract's rules narrow with. */
  const merge = (a: Record<string, any>, b: Record<string, any>): Record<string, any> => {
    if (a.$ref) a = resolve(a.$ref) as Record<string, any>;
    const out: Record<string, any> = { ...a };
    for (const [key, value] of Object.entries(b)) {
      if (key === 'properties') {
        out.properties = { ...a.properties };
        for (const [name, sub] of Object.entries(value as Record<string, any>)) {
          out.properties[name] = a.properties?.[name] ? merge(a.properties[name], sub) : sub;
        }
      } else if (key === 'items') out.items = a.items ? merge(a.items, value) : value;
      else if (key === 'required') out.required = [...new Set([...(a.required ?? []), ...value])];
      else if (key === 'minimum') out.minimum = Math.max(a.minimum ?? -Infinity, value);
      else if (key === 'maximum') out.maximum = Math.min(a.maximum ?? Infinity, value);
      else if (key === 'not' && 'const' in value && a.enum) out.enum = a.enum.filter((v: unknown) => v !== value.const);
      else if (key === 'not' && Object.keys(value).length === 0) return { not: {} };
      else if (key !== 'x-niclab-rule' && key !== 'description') out[key] = value;
    }
    return out;
  };

  /** Leaves out the properties a rule forbids (`not: {}`), at any depth. */
  const forbid = (node: Record<string, any>): Record<string, any> => {
    if (!node.properties) return node;
    const properties: Record<string, any> = {};
    for (const [name, sub] of Object.entries(node.properties as Record<string, any>)) {
      if (sub.not && Object.keys(sub.not).length === 0) continue;
      properties[name] = forbid(sub);
    }
    return { ...node, properties, required: (node.required ?? []).filter((name: string) => name in properties) };
  };

  return build(schema as Schema);
}

const CONFLICT = Symbol('conflict');

/** Evaluates the `if` of a rule, and its branches on the fields it read (plain keywords, no references). */
const conditions = new Ajv2020({ strict: false });
const compiled = new Map<string, ReturnType<Ajv2020['compile']>>();
/** Each schema object's validator, found without serialising it again (a branch carries all the components). */
const byObject = new WeakMap<object, ReturnType<Ajv2020['compile']>>();
const schemaKeys = new WeakMap<object, string>();
function holds(schema: unknown, value: unknown): boolean {
  let validate = byObject.get(schema as object);
  if (!validate) {
    const key = schemaKeys.get(schema as object) ?? JSON.stringify(schema);
    if (!compiled.has(key)) compiled.set(key, conditions.compile(schema as object));
    validate = compiled.get(key)!;
    byObject.set(schema as object, validate);
  }
  return validate(value) as boolean;
}
