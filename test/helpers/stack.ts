import { after, before } from 'node:test';
import type { Express } from 'express';
import { AgentService } from '@niclab/agent/agent';
import { useBuiltEngineChildren } from '@niclab/agent/engines/child';
import { createApp } from '@niclab/api/app';
import { createApiServices, type ApiServices } from '@niclab/api/services';
import { Coordinator } from '@niclab/coordinator/coordinator';
import { loadConfig, type Config } from '@niclab/shared/runtime/config';
import { createLogger } from '@niclab/shared/runtime/logger';
import { startTestRedis, uniquePrefix, type TestRedis } from './redis.js';

// In-process agents start their engines from dist/ (npm test builds first), as spawned agents do:
// a tsx child took 1 s of CPU to start, and a group job starts dozens.
useBuiltEngineChildren();

export type TestConfig = Config & { redisUrl: string };

/** A config for one test: its own key prefix on the given Redis, fast heartbeats, the product's setup allowance (10 s, for a loaded machine), quiet logs. */
export function testConfig(redisUrl: string, overrides: Partial<Config> = {}): TestConfig {
  return loadConfig({}, { redisUrl, prefix: uniquePrefix(), heartbeatSeconds: 1, setupSeconds: 10, logLevel: 'silent', ...overrides }) as TestConfig;
}

export const silentLog = createLogger('silent');

/** The API (via createApp, for supertest), optionally with in-process agents and a coordinator. */
export interface Stack {
  config: TestConfig;
  services: ApiServices;
  app: Express;
  agents: AgentService[];
  coordinator?: Coordinator;
  close(): Promise<void>;
}

export async function startStack(config: TestConfig, options: { agents?: string[]; coordinator?: boolean } = {}): Promise<Stack> {
  const services = createApiServices(config, silentLog);
  const agents: AgentService[] = [];
  for (const id of options.agents ?? []) {
    const agent = new AgentService({ ...config, agentId: id }, silentLog);
    await agent.start();
    agents.push(agent);
  }
  let coordinator: Coordinator | undefined;
  if (options.coordinator) {
    coordinator = new Coordinator(config, silentLog);
    await coordinator.start();
  }
  return {
    config, services, agents, coordinator,
    app: createApp(services),
    async close() {
      for (const agent of agents) await agent.stop();
      await coordinator?.stop();
      await services.close();
    },
  };
}

/**
 * One stack for a whole test file, on a Redis of its own: started before the file's tests
 * (handed to `use`), closed after them.
 */
export function stackPerFile(options: { agents?: string[]; coordinator?: boolean; config?: Partial<Config> }, use: (stack: Stack) => void): void {
  let redis: TestRedis | undefined;
  let stack: Stack | undefined;
  before(async () => {
    redis = await startTestRedis();
    stack = await startStack(testConfig(redis.url, options.config), options);
    use(stack);
  });
  after(async () => {
    await stack?.close();
    await redis?.stop();
  });
}
