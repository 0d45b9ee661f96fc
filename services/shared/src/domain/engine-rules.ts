/**
 * What each engine can run, decided from the spec and the agents' own probes alone: the API
 * checks a submission with it without knowing how an engine works (pscheduler's tools list
 * the tests they can run; each agent says what its host cannot do).
 */
import type { Agent, EngineName, JobSpec } from './contract.js';
import { kindOf, type TestName } from './test-kinds/index.js';

/** A host ability an engine may lack (reported in its probe as `unsupported`, with the reason). */
export type HostFeature = 'tcpSocketBuffer';

/** The builtin engine's UDP datagram header: magic, leg token, stream and kind, sequence number, send time. */
export const BUILTIN_UDP_HEADER_BYTES = 4 + 4 + 2 + 2 + 8 + 8;

export interface EngineRules {
  /** The test kinds it implements, each over the protocols it can carry it on. */
  readonly tests: Partial<Record<TestName, readonly JobSpec['protocol'][]>>;
  /** Why it cannot run this spec on any host; empty when it can. */
  specReasons(spec: JobSpec): string[];
  /** The host features this spec needs of it. */
  needs(spec: JobSpec): HostFeature[];
}

export const ENGINE_RULES: Record<EngineName, EngineRules> = {
  builtin: {
    // The probe is UDP whatever `protocol` says: it does not apply to it.
    tests: { stream: ['tcp', 'udp'], rr: ['tcp'], probe: ['tcp', 'udp'] },
    specReasons(spec) {
      const reasons: string[] = [];
      const sizes = [spec.udp?.packetSize, ...(spec.sweep?.packetSize ?? [])].filter((n): n is number => n !== undefined);
      if (spec.protocol === 'udp' && sizes.some((n) => n < BUILTIN_UDP_HEADER_BYTES)) {
        reasons.push(`the builtin engine's UDP datagrams carry a ${BUILTIN_UDP_HEADER_BYTES}-byte header: packetSize must be at least ${BUILTIN_UDP_HEADER_BYTES}`);
      }
      return reasons;
    },
    needs: (spec) => (spec.protocol === 'tcp' && (spec.socketBuffer !== undefined || spec.sweep?.socketBuffer) ? ['tcpSocketBuffer'] : []),
  },
  iperf3: {
    tests: { stream: ['tcp', 'udp'] },
    specReasons(spec) {
      return Number.isInteger(spec.duration) ? [] : [`iperf3 takes whole seconds: duration ${spec.duration} is not one`];
    },
    needs: () => [],
  },
};

/** Reasons the spec cannot run with its engine on these agents; empty when it can. */
export function canRun(spec: JobSpec, agents: Agent[]): string[] {
  const rules = ENGINE_RULES[spec.engine];
  const reasons: string[] = [];
  const { phrase } = kindOf(spec);
  const protocols = rules.tests[spec.test];
  if (!protocols) reasons.push(`${spec.engine} does not do ${phrase} tests`);
  else if (!protocols.includes(spec.protocol)) reasons.push(`the ${spec.engine} engine does ${phrase} over ${protocols.map((p) => p.toUpperCase()).join(' and ')} only`);
  reasons.push(...rules.specReasons(spec));
  const needs = rules.needs(spec);
  for (const agent of agents) {
    const info = agent.engines[spec.engine];
    if (!info?.available) {
      reasons.push(`agent ${agent.id} cannot run the ${spec.engine} engine${info?.reason ? `: ${info.reason}` : ''}`);
      continue;
    }
    for (const feature of needs) {
      const why = info.unsupported?.[feature];
      if (why) reasons.push(`agent ${agent.id}: the ${spec.engine} engine ${why}; use engine iperf3`);
    }
  }
  return reasons;
}
