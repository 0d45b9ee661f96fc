import { hostname } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { CHANGE_DEFAULTS, type ChangeOptions } from '../domain/changes/detect.js';
import { AGENT_ID } from '../domain/names.js';
import { parseInterfaceFilter, type InterfaceFilter } from '../domain/interface-filter.js';

/** Everything niclab reads from its environment, parsed once at start. Nothing else reads process.env. */
export interface Config {
  /**
   * Redis to use; undefined means "none configured" (npm start then starts a private one).
   * With Sentinel (NICLAB_REDIS_SENTINELS, NICLAB_REDIS_MASTER) it is a
   * `redis-sentinel://[user:password@]host:port,host:port/master[?tls=1]`, which runtime/redis.ts connects by.
   */
  readonly redisUrl: string | undefined;
  /**
   * An acknowledged write (a job's 202, a schedule's 201) waits until this many replicas have it
   * (Redis WAIT), else it is answered 503; 0 for a single Redis.
   */
  readonly redisWaitReplicas: number;
  /** How long that wait may take, in milliseconds. */
  readonly redisWaitMs: number;
  /** Prefix of every Redis key and BullMQ queue, so several niclabs can share one Redis. */
  readonly prefix: string;
  readonly host: string;
  readonly port: number;
  readonly agentId: string;
  /** NICLAB_AGENT_LABELS (`rack=r1,lab=nic`): what policies select agents by. */
  readonly agentLabels: Readonly<Record<string, string>>;
  readonly heartbeatSeconds: number;
  /** NICLAB_AGENT_INTERFACES: which of its host's interfaces an agent reports (domain/interface-filter.ts). */
  readonly agentInterfaces: InterfaceFilter;
  /**
   * NICLAB_AGENT_PRUNE_HOURS, in seconds: an agent offline this long is dropped from the
   * inventory with its metric series (its measured links); 0 keeps every agent for ever.
   */
  readonly agentPruneSeconds: number;
  /** Seconds a run may take beyond its duration for setup and teardown before it is failed. */
  readonly setupSeconds: number;
  /**
   * Seconds an agent's lock on a task it holds lasts without renewal (BullMQ's lockDuration):
   * an agent cut off from Redis longer than this has its task found stalled.
   */
  readonly taskLockSeconds: number;
  /** The virtual lab `niclab lab` acts on without `--name` (NICLAB_LAB). */
  readonly labName: string;
  readonly bodyLimitBytes: number;
  readonly logLevel: string;
  readonly dataDir: string;
  /** Run the coordinator inside the API process. */
  readonly coordinator: boolean;
  /** Finished jobs (with their runs and raw output) are deleted after this many days... */
  readonly retentionDays: number;
  /** ...or, beyond this many finished jobs, oldest first. */
  readonly retentionJobs: number;
  /** Run summaries (/v1/results) are kept this many days. */
  readonly resultsRetentionDays: number;
  /** Change-point detection in the schedules' series (domain/changes/detect.ts). */
  readonly changes: ChangeOptions;
  /** Where the scripting commands (`niclab run`, ...) find the API, and their token. */
  readonly apiUrl: string;
  readonly token: string | undefined;
  /** The API's access policy (tokens, scopes, limits); unset means anyone may do anything. */
  readonly policyFile: string | undefined;
  /** NICLAB_AUTH=none: serve without a policy file beyond loopback, knowingly. */
  readonly authNone: boolean;
  /** NICLAB_TLS_CERT_FILE and NICLAB_TLS_KEY_FILE (PEM): the API serves HTTPS with them; both or neither. */
  readonly tlsCertFile: string | undefined;
  readonly tlsKeyFile: string | undefined;
  /**
   * NICLAB_FILE_DIR: the one directory an agent reads file sources from and writes file sinks
   * in (jobs with `file`), as an absolute path; unset, the agent takes no file job. The agent
   * checks at start that it is a directory it can write.
   */
  readonly fileDir: string | undefined;
}

export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function number(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min || value > max) {
    throw new ConfigError(name, `must be a number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = number(env, name, fallback, min, max);
  if (!Number.isInteger(value)) throw new ConfigError(name, `must be a whole number from ${min} to ${max}, got "${env[name]}"`);
  return value;
}

function oneOf<T extends string>(env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

function redisUrl(env: Env): string | undefined {
  const raw = env.REDIS_URL;
  if (raw !== undefined && raw !== '' && !/^(rediss?:\/\/|unix:\/\/\/)/.test(raw)) {
    throw new ConfigError('REDIS_URL', `must start with redis://, rediss:// or unix:///, got "${raw}"`);
  }
  const sentinels = env.NICLAB_REDIS_SENTINELS;
  if (!sentinels) {
    if (env.NICLAB_REDIS_MASTER) throw new ConfigError('NICLAB_REDIS_MASTER', 'is set, but NICLAB_REDIS_SENTINELS is not: give the sentinels as host:port,host:port');
    return raw || undefined;
  }
  const addresses = sentinels.split(',').map((a) => a.trim());
  for (const address of addresses) {
    if (!/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:]+\]:\d{1,5}$/.test(address)) throw new ConfigError('NICLAB_REDIS_SENTINELS', `"${address}" is not host:port`);
  }
  const master = env.NICLAB_REDIS_MASTER;
  if (!master || !/^[A-Za-z0-9._-]{1,64}$/.test(master)) throw new ConfigError('NICLAB_REDIS_MASTER', `must name the master the sentinels monitor (letters, digits, ".", "_", "-"), got "${master ?? ''}"`);
  if (raw?.startsWith('unix://')) throw new ConfigError('REDIS_URL', 'with NICLAB_REDIS_SENTINELS it gives only the credentials and TLS (redis:// or rediss://), not a socket');
  // REDIS_URL, if given beside the sentinels, gives the master's credentials and whether to use TLS.
  const given = raw ? new URL(raw) : null;
  const auth = given && (given.username || given.password) ? `${given.username}:${given.password}@` : '';
  return `redis-sentinel://${auth}${addresses.join(',')}/${master}${given?.protocol === 'rediss:' ? '?tls=1' : ''}`;
}

function agentLabels(env: Env): Record<string, string> {
  const raw = env.NICLAB_AGENT_LABELS ?? '';
  const labels: Record<string, string> = {};
  for (const pair of raw.split(',').map((p) => p.trim()).filter(Boolean)) {
    const match = /^([A-Za-z0-9][A-Za-z0-9._-]{0,62})=([A-Za-z0-9._-]{0,63})$/.exec(pair);
    if (!match) throw new ConfigError('NICLAB_AGENT_LABELS', `"${pair}" is not key=value (letters, digits, ".", "_", "-")`);
    labels[match[1]!] = match[2]!;
  }
  return labels;
}

function agentInterfaces(env: Env): InterfaceFilter {
  try {
    return parseInterfaceFilter(env.NICLAB_AGENT_INTERFACES ?? '');
  } catch (error) {
    throw new ConfigError('NICLAB_AGENT_INTERFACES', (error as Error).message);
  }
}

function apiUrl(env: Env): string {
  const url = env.NICLAB_API || 'http://127.0.0.1:8080';
  if (!/^https?:\/\/[^\s]+$/.test(url)) throw new ConfigError('NICLAB_API', `must be an http:// or https:// URL, got "${url}"`);
  return url;
}

/** As lab.ts's LAB_NAME: it names namespaces (`<name>-A`, `<name>-sw`). */
function labName(env: Env): string {
  const name = env.NICLAB_LAB || 'nl';
  if (!/^[a-z][a-z0-9]{0,9}$/.test(name)) throw new ConfigError('NICLAB_LAB', `must be a lowercase letter then up to 9 lowercase letters or digits, got "${name}"`);
  return name;
}

/** An absolute directory, given as such: a relative one would depend on where the agent was started. */
function fileDir(env: Env): string | undefined {
  const raw = env.NICLAB_FILE_DIR;
  if (raw === undefined || raw === '') return undefined;
  if (!isAbsolute(raw) || /[\u0000-\u001f]/.test(raw)) throw new ConfigError('NICLAB_FILE_DIR', `must be an absolute path, got "${raw}"`);
  return resolve(raw);
}

function defaultAgentId(): string {
  const name = hostname().replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '');
  return (name || 'agent').slice(0, 63);
}

/** Parses the environment; throws ConfigError naming the variable on a bad value. */
export function loadConfig(env: Env = process.env, overrides: Partial<Config> = {}, fallbackAgentId?: string): Config {
  const prefix = env.NICLAB_PREFIX || 'niclab';
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(prefix)) {
    throw new ConfigError('NICLAB_PREFIX', `must be 1-40 letters, digits, "_" or "-", got "${prefix}"`);
  }
  const agentId = overrides.agentId ?? (env.NICLAB_AGENT_ID || fallbackAgentId || defaultAgentId());
  if (!AGENT_ID.test(agentId)) {
    throw new ConfigError(overrides.agentId ? '--id' : 'NICLAB_AGENT_ID', `"${agentId}" is not a valid agent id (letters, digits, ".", "_", "-")`);
  }
  const config: Config = {
    redisUrl: redisUrl(env),
    redisWaitReplicas: integer(env, 'NICLAB_REDIS_WAIT_REPLICAS', 0, 0, 10),
    redisWaitMs: integer(env, 'NICLAB_REDIS_WAIT_MS', 1000, 10, 60_000),
    prefix,
    host: env.NICLAB_HOST || '127.0.0.1',
    port: number(env, 'NICLAB_PORT', 8080, 0, 65535),
    agentId,
    agentLabels: agentLabels(env),
    heartbeatSeconds: number(env, 'NICLAB_HEARTBEAT_SECONDS', 5, 0.2, 300),
    agentInterfaces: agentInterfaces(env),
    agentPruneSeconds: number(env, 'NICLAB_AGENT_PRUNE_HOURS', 168, 0, 87600) * 3600,
    setupSeconds: number(env, 'NICLAB_SETUP_SECONDS', 10, 1, 600),
    taskLockSeconds: number(env, 'NICLAB_TASK_LOCK_SECONDS', 30, 2, 3600),
    labName: labName(env),
    bodyLimitBytes: number(env, 'NICLAB_BODY_LIMIT_BYTES', 65536, 1024, 16 * 1024 * 1024),
    logLevel: oneOf(env, 'NICLAB_LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    dataDir: resolve(env.NICLAB_DATA_DIR || '.niclab'),
    coordinator: oneOf(env, 'NICLAB_COORDINATOR', 'true', ['true', 'false']) === 'true',
    retentionDays: number(env, 'NICLAB_RETENTION_DAYS', 30, 0.0001, 36500),
    retentionJobs: number(env, 'NICLAB_RETENTION_JOBS', 10000, 1, 10_000_000),
    resultsRetentionDays: number(env, 'NICLAB_RESULTS_RETENTION_DAYS', 365, 0.0001, 36500),
    changes: {
      windowLength: integer(env, 'NICLAB_CHANGE_WINDOW', CHANGE_DEFAULTS.windowLength, 8, 200),
      maxPValue: number(env, 'NICLAB_CHANGE_MAX_P', CHANGE_DEFAULTS.maxPValue, 1e-12, 0.5),
      minStep: number(env, 'NICLAB_CHANGE_MIN_STEP', CHANGE_DEFAULTS.minStep, 0, 10),
      minSegment: integer(env, 'NICLAB_CHANGE_MIN_SEGMENT', CHANGE_DEFAULTS.minSegment, 1, 100),
    },
    apiUrl: apiUrl(env),
    token: env.NICLAB_TOKEN || undefined,
    policyFile: env.NICLAB_POLICY_FILE ? resolve(env.NICLAB_POLICY_FILE) : undefined,
    authNone: oneOf(env, 'NICLAB_AUTH', 'policy', ['policy', 'none']) === 'none',
    tlsCertFile: env.NICLAB_TLS_CERT_FILE ? resolve(env.NICLAB_TLS_CERT_FILE) : undefined,
    tlsKeyFile: env.NICLAB_TLS_KEY_FILE ? resolve(env.NICLAB_TLS_KEY_FILE) : undefined,
    fileDir: fileDir(env),
    ...overrides,
  };
  if (!config.tlsCertFile !== !config.tlsKeyFile) {
    const [missing, given] = config.tlsCertFile ? ['NICLAB_TLS_KEY_FILE', 'NICLAB_TLS_CERT_FILE'] : ['NICLAB_TLS_CERT_FILE', 'NICLAB_TLS_KEY_FILE'];
    throw new ConfigError(missing, `is not set, but ${given} is: HTTPS needs both the certificate and its key`);
  }
  return Object.freeze(config);
}
