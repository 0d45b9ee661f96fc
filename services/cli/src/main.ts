#!/usr/bin/env node
import { once } from 'node:events';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Policy, Scope } from '@niclab/api/policy';
import type { TlsFiles } from '@niclab/api/tls';
import { CLIENT_COMMANDS, clientCommand } from './client/commands.js';
import { helpFor } from './help.js';
import { USAGE } from './usage.js';
import { completionScript, SERVICE_COMMANDS } from './completion.js';
import { ConfigError, loadConfig, type Config } from '@niclab/shared/runtime/config';
import { createLogger, type Logger } from '@niclab/shared/runtime/logger';
import type { PrivateRedis } from '@niclab/shared/runtime/private-redis';
import { VERSION } from '@niclab/shared/runtime/version';
// The API, coordinator, agent and lab are imported when a command runs them: a client command
// (`niclab agents`, `niclab run`) loaded all of them first, 1.3 s of CPU before its request.


type Stopper = () => Promise<void>;

async function listen(config: Config & { redisUrl: string }, policy: Policy, tls: TlsFiles | null, log: Logger, stoppers: Stopper[]): Promise<void> {
  const [{ createApiServices }, { createApp }, { isLoopback }] = await Promise.all([import('@niclab/api/services'), import('@niclab/api/app'), import('@niclab/api/policy')]);
  const services = createApiServices(config, log, policy);
  services.schedules.start(log);
  const app = createApp(services);
  const server: Server = tls ? createHttpsServer(tls, app) : createHttpServer(app);
  // Idle keep-alive connections stay open longer than a client's (undici's 4 s, a proxy's 60 s)
  // would reuse them: with Node's 5 s, a loaded API closed one as a client sent on it.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.listen(config.port, config.host);
  await once(server, 'listening');
  const address = server.address();
  log.info({ url: `${tls ? 'https' : 'http'}://${config.host}:${typeof address === 'object' && address ? address.port : config.port}` }, 'api listening');
  if (!tls && policy.tokens.length > 0 && !isLoopback(config.host)) {
    log.warn({ host: config.host }, 'tokens cross the network in clear text: set NICLAB_TLS_CERT_FILE and NICLAB_TLS_KEY_FILE, or put a TLS proxy in front');
  }
  stoppers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await services.close();
  });
}

async function coordinate(config: Config & { redisUrl: string }, log: Logger, stoppers: Stopper[]): Promise<void> {
  const { Coordinator } = await import('@niclab/coordinator/coordinator');
  const coordinator = new Coordinator(config, log.child({ role: 'coordinator' }));
  await coordinator.start();
  stoppers.push(() => coordinator.stop());
}

async function runAgent(config: Config & { redisUrl: string }, log: Logger, stoppers: Stopper[]): Promise<void> {
  const { AgentService } = await import('@niclab/agent/agent');
  const agent = new AgentService(config, log.child({ role: 'agent' }));
  await agent.start();
  stoppers.push(() => agent.stop());
}

async function main(argv: string[]): Promise<void> {
  const first = argv[0];
  if (first && (CLIENT_COMMANDS as readonly string[]).includes(first)) {
    const config = loadConfig(process.env);
    process.exitCode = await clientCommand(first, argv.slice(1), {
      env: { api: config.apiUrl, token: config.token },
      out: (line) => console.log(line),
      err: (line) => console.error(line),
      tty: process.stderr.isTTY === true,
    });
    return;
  }
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      id: { type: 'string' },
      hosts: { type: 'string' },
      rate: { type: 'string' },
      name: { type: 'string' },
      'agent-prefix': { type: 'string' },
      labels: { type: 'string' },
      'file-dir': { type: 'string' },
      'no-coordinator': { type: 'boolean' },
      scope: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
    },
  });
  const command = positionals[0];
  if (values.version) return void console.log(VERSION);
  // `niclab lab --help`: that command's lines of the usage; `niclab --help`, all of it.
  if (values.help || !command) return void console.log((command && helpFor(USAGE, command)) || USAGE);
  if (command === 'completion') {
    const script = completionScript(positionals[1]);
    if (!script) throw new UsageError(`completion: give bash or zsh${positionals[1] ? `, not "${positionals[1]}"` : ''}`);
    return void console.log(script);
  }
  if (!(SERVICE_COMMANDS as readonly string[]).includes(command)) throw new UsageError(`unknown command "${command}"`);
  if (command === 'token') return printToken(positionals[1], values.scope ?? 'run', await import('@niclab/api/policy'));

  const overrides: { -readonly [K in keyof Config]?: Config[K] } = {};
  if (values.id) overrides.agentId = values.id;
  if (values['no-coordinator']) overrides.coordinator = false;
  // `start` is the one-machine setup: its agent is "local" unless NICLAB_AGENT_ID says otherwise.
  const base = loadConfig(process.env, overrides, command === 'start' ? 'local' : undefined);
  // Read once, here: a policy the API could not serve with stops the start before anything
  // (a private Redis) runs.
  const policy = command === 'start' || command === 'api' ? (await import('@niclab/api/policy')).apiPolicy(base) : null;
  const tls = policy ? (await import('@niclab/api/tls')).apiTls(base) : null;
  if (command === 'lab') {
    const { labCommand } = await import('./lab/cli.js');
    process.exitCode = await labCommand(positionals[1], values, base);
    return;
  }
  const log = createLogger(base.logLevel, { service: 'niclab' });

  // Stopped in reverse order: agent and coordinator first (their processes end), Redis last.
  const stoppers: Stopper[] = [];
  let redis: PrivateRedis | undefined;
  let redisUrl = base.redisUrl;
  if (!redisUrl && command === 'start') {
    const { startPrivateRedis } = await import('@niclab/shared/runtime/private-redis');
    redis = await startPrivateRedis(join(base.dataDir, 'redis'));
    redisUrl = redis.url;
    stoppers.push(() => redis!.stop());
    log.info({ redis: redisUrl, pid: redis.pid }, 'started a private redis-server (REDIS_URL is unset)');
  }
  const config = { ...base, redisUrl: redisUrl ?? 'redis://127.0.0.1:6379' };

  let stopping = false;
  // The parts still starting when a signal comes: shutdown waits for them, so that one that
  // finishes starting late (the agent, while Redis stops) is stopped too, and before Redis.
  let starting: Promise<void> = Promise.resolve();
  const shutdown = async (signal: string) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    const startBound = new Promise<void>((resolve) => setTimeout(resolve, 15_000).unref());
    await Promise.race([starting.catch(() => undefined), startBound]);
    for (const stop of [...stoppers].reverse()) {
      // Each step is bounded: a shutdown never hangs on a peer (e.g. Redis) that is already gone.
      const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timed out after 5 s')), 5000).unref());
      await Promise.race([stop(), timeout]).catch((error: unknown) => log.error({ err: error }, 'shutdown step failed'));
    }
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));

  starting = (async () => {
    if (policy) await listen(config, policy, tls, log.child({ role: 'api' }), stoppers);
    if (stopping) return;
    if (command === 'coordinator' || ((command === 'start' || command === 'api') && config.coordinator)) await coordinate(config, log, stoppers);
    if (stopping) return;
    if (command === 'start' || command === 'agent') await runAgent(config, log, stoppers);
  })();
  await starting;
}

function printToken(name: string | undefined, scope: string, { TOKEN_NAME, SCOPES, newToken }: typeof import('@niclab/api/policy')): void {
  if (!name || !TOKEN_NAME.test(name)) throw new UsageError('token needs a NAME: letters, digits, ".", "_", "@", "-"');
  if (!(SCOPES as readonly string[]).includes(scope)) throw new UsageError(`--scope must be one of ${SCOPES.join(', ')}`);
  const { token, sha256 } = newToken();
  console.log(`token: ${token}`);
  console.log(`Give it to its user (NICLAB_TOKEN or --token); niclab keeps only its hash. Add to the policy file's tokens:`);
  console.log(`  - { name: ${name}, sha256: "${sha256}", scopes: [${scope as Scope}] }`);
}

export class UsageError extends Error {}

main(process.argv.slice(2)).catch((error: Error) => {
  if (error instanceof ConfigError || error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    console.error(`niclab: ${error.message}\n\nRun "niclab --help" for usage.`);
    process.exit(2);
  }
  console.error(`niclab: ${error.message}`);
  process.exit(1);
});
