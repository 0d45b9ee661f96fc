import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { ConfigError, type Config } from '@niclab/shared/runtime/config';
import { createAjv, fieldErrors } from '@niclab/shared/runtime/openapi';

/** A token's name in the policy file (and in `niclab token NAME`). */
export const TOKEN_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,62}$/;

/** What a token may do; each includes the ones before it. */
export const SCOPES = ['read', 'run', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** What a token's jobs may ask for. Unset means no limit. */
export interface Limits {
  maxDurationSeconds?: number;
  maxStreams?: number;
  maxUdpBitsPerSecond?: number;
  maxRunsPerJob?: number;
  maxConcurrentJobs?: number;
  /** The agents a token may use: every label given must match the agent's. */
  agentLabels?: Record<string, string>;
  /** The interface names a token may use. */
  interfaces?: string[];
}

/** Who is asking: a token's name and what it may do. */
export interface Principal {
  name: string;
  scope: Scope | null;
  limits: Limits;
}

interface TokenEntry {
  name: string;
  hash: Buffer;
  scope: Scope;
  limits: Limits;
}

export interface Policy {
  /** True when requests must carry a token; false when no policy file is configured. */
  readonly enforced: boolean;
  readonly anonymous: 'none' | 'read';
  readonly metrics: 'public' | 'read';
  readonly requestsPerMinute: number | null;
  readonly tokens: readonly TokenEntry[];
}

/** No policy file: everyone may do everything, as the local `npm start` needs. */
export const OPEN_POLICY: Policy = { enforced: false, anonymous: 'none', metrics: 'public', requestsPerMinute: null, tokens: [] };

const LIMITS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    maxDurationSeconds: { type: 'number', exclusiveMinimum: 0 },
    maxStreams: { type: 'integer', minimum: 1 },
    maxUdpBitsPerSecond: { type: 'number', exclusiveMinimum: 0 },
    maxRunsPerJob: { type: 'integer', minimum: 1 },
    maxConcurrentJobs: { type: 'integer', minimum: 0 },
    agentLabels: { type: 'object', additionalProperties: { type: 'string' } },
    interfaces: { type: 'array', items: { type: 'string' } },
  },
};

const POLICY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['tokens'],
  properties: {
    anonymous: { enum: ['none', 'read'] },
    metrics: { enum: ['public', 'read'] },
    requestsPerMinute: { type: 'integer', minimum: 1 },
    limits: LIMITS_SCHEMA,
    tokens: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'sha256', 'scopes'],
        properties: {
          name: { type: 'string', pattern: TOKEN_NAME.source },
          sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
          scopes: { type: 'array', minItems: 1, items: { enum: SCOPES } },
          limits: LIMITS_SCHEMA,
        },
      },
    },
  },
};

interface PolicyFile {
  anonymous?: 'none' | 'read';
  metrics?: 'public' | 'read';
  requestsPerMinute?: number;
  limits?: Limits;
  tokens: { name: string; sha256: string; scopes: Scope[]; limits?: Limits }[];
}

const VARIABLE = 'NICLAB_POLICY_FILE';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

export const isLoopback = (host: string): boolean => LOOPBACK.test(host);

/**
 * The policy the API serves with. Without a policy file it is open to anyone, which is only
 * allowed on loopback unless NICLAB_AUTH=none says so: an API reachable from the lab network
 * does not become open by omission.
 */
export function apiPolicy(config: Pick<Config, 'policyFile' | 'authNone' | 'host'>): Policy {
  if (config.policyFile && config.authNone) throw new ConfigError('NICLAB_AUTH', 'is "none" but NICLAB_POLICY_FILE is set too; choose one');
  if (config.policyFile) return loadPolicy(config.policyFile);
  if (config.authNone || isLoopback(config.host)) return OPEN_POLICY;
  throw new ConfigError(VARIABLE, `is not set and the API would listen on ${config.host}, beyond this host: set a policy file (see README, "Access"), or NICLAB_AUTH=none to let anyone who reaches it run jobs`);
}

/**
 * Reads and checks the policy file (YAML or JSON). Anything wrong with it is a ConfigError, so
 * the API refuses to start rather than run with a policy it did not understand.
 */
export function loadPolicy(path: string): Policy {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(VARIABLE, `cannot read ${path}: ${(error as Error).message}`);
  }
  let data: unknown;
  try {
    data = parse(text);
  } catch (error) {
    throw new ConfigError(VARIABLE, `${path} is not valid YAML or JSON: ${(error as Error).message}`);
  }
  const validate = createAjv().compile<PolicyFile>(POLICY_SCHEMA);
  if (!validate(data)) {
    const errors = fieldErrors(validate.errors, 'policy').map((e) => `${e.field} ${e.message}`);
    throw new ConfigError(VARIABLE, `${path}: ${errors.join('; ')}`);
  }
  const file = data;
  const names = new Set<string>();
  const hashes = new Set<string>();
  for (const [i, token] of file.tokens.entries()) {
    if (names.has(token.name)) throw new ConfigError(VARIABLE, `${path}: policy.tokens[${i}].name "${token.name}" is used twice`);
    if (hashes.has(token.sha256)) throw new ConfigError(VARIABLE, `${path}: policy.tokens[${i}].sha256 is the hash of another token too`);
    names.add(token.name);
    hashes.add(token.sha256);
  }
  return {
    enforced: true,
    anonymous: file.anonymous ?? 'none',
    metrics: file.metrics ?? 'public',
    requestsPerMinute: file.requestsPerMinute ?? null,
    tokens: file.tokens.map((token) => ({
      name: token.name,
      hash: Buffer.from(token.sha256, 'hex'),
      scope: highest(token.scopes),
      limits: { ...file.limits, ...token.limits },
    })),
  };
}

function highest(scopes: Scope[]): Scope {
  return SCOPES[Math.max(...scopes.map((s) => SCOPES.indexOf(s)))]!;
}

export function includes(held: Scope | null, needed: Scope): boolean {
  return held !== null && SCOPES.indexOf(held) >= SCOPES.indexOf(needed);
}

export function tokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A new random token and the hash that goes in the policy file. */
export function newToken(): { token: string; sha256: string } {
  const token = `nlt_${randomBytes(32).toString('base64url')}`;
  return { token, sha256: tokenHash(token) };
}

/**
 * The principal a schedule's owner is now, by its token's name: its current scope and limits
 * (a policy edited since the schedule was made applies to its next firing). Null when the
 * policy no longer has that token. Without a policy file everyone may do everything.
 */
export function principalNamed(policy: Policy, name: string): Principal | null {
  if (!policy.enforced) return { name, scope: 'admin', limits: {} };
  const entry = policy.tokens.find((token) => token.name === name);
  return entry ? { name: entry.name, scope: entry.scope, limits: entry.limits } : null;
}

/**
 * The principal behind an `Authorization` header: null when there is none, undefined when it
 * names no token. Every configured hash is compared, in constant time, whichever matches.
 */
export function authenticate(policy: Policy, header: string | undefined): Principal | null | undefined {
  if (!policy.enforced) return { name: 'anonymous', scope: 'admin', limits: {} };
  if (header === undefined || header === '') {
    return policy.anonymous === 'read' ? { name: 'anonymous', scope: 'read', limits: {} } : null;
  }
  const match = /^Bearer ([\x21-\x7e]{1,512})$/i.exec(header);
  if (!match) return undefined;
  const presented = createHash('sha256').update(match[1]!, 'utf8').digest();
  let found: TokenEntry | undefined;
  for (const entry of policy.tokens) {
    if (timingSafeEqual(presented, entry.hash) && !found) found = entry;
  }
  return found ? { name: found.name, scope: found.scope, limits: found.limits } : undefined;
}
