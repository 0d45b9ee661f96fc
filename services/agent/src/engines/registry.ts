import type { EngineInfo, EngineName } from '@niclab/shared/domain/contract';
import type { Engine } from './engine.js';
import { builtinEngine } from './builtin/index.js';
import { iperf3Engine } from './iperf3/index.js';

/** Every engine, by name. Engines not yet built are absent: submissions naming them get a 422. */
export const ENGINES: Partial<Record<EngineName, Engine>> = {
  builtin: builtinEngine,
  iperf3: iperf3Engine,
};

export function engineFor(name: EngineName): Engine | undefined {
  return ENGINES[name];
}

/** What each engine can do on this host, for the agent's registration. */
export async function probeEngines(): Promise<Record<string, EngineInfo>> {
  const entries = await Promise.all(Object.values(ENGINES).map(async (engine) => [engine.name, await engine.capabilities()] as const));
  return Object.fromEntries(entries);
}
