import { isIP } from 'node:net';
import type { ValidateFunction } from 'ajv';
import { compileSchema, createAjv, fieldErrors } from './openapi.js';
import { tuningErrors, type EndTuning } from '../domain/tuning-rules.js';

const spec = (field: string) => ({ $ref: `#/components/schemas/JobSpec/properties/${field}` });

/**
 * A task as an agent accepts it, from the same field schemas as the API's JobSpec: the agent
 * checks every task again, so nothing that reached Redis by another way than the API (a
 * bug, a hand-written task, a compromised coordinator) reaches a process unchecked.
 */
const TASK_SCHEMA = {
  type: 'object',
  required: ['jobId', 'runId', 'leg', 'engine', 'params', 'interface', 'deadline', 'role'],
  properties: {
    jobId: { $ref: '#/components/schemas/Id' },
    runId: { $ref: '#/components/schemas/Id' },
    leg: { type: 'integer', minimum: 0, maximum: 255 },
    engine: { $ref: '#/components/schemas/Engine' },
    interface: { $ref: '#/components/schemas/InterfaceName' },
    deadline: { type: 'integer', minimum: 0 },
    role: { enum: ['sender', 'receiver'] },
    startAt: { type: 'integer', minimum: 0 },
    tuning: { $ref: '#/components/schemas/EndTuning' },
    peerMtu: { type: 'integer', minimum: 68, maximum: 65535 },
    peer: {
      type: 'object',
      additionalProperties: false,
      required: ['address', 'port'],
      properties: { address: { type: 'string', maxLength: 45 }, port: { type: 'integer', minimum: 1, maximum: 65535 } },
    },
    params: {
      type: 'object',
      additionalProperties: false,
      required: ['protocol', 'test', 'duration', 'bufferLength', 'streams', 'noDelay', 'interval'],
      properties: {
        ...Object.fromEntries(['protocol', 'test', 'bufferLength', 'socketBuffer', 'streams', 'noDelay', 'udp', 'interval', 'file'].map((f) => [f, spec(f)])),
        // A latency flow's duration includes its idle baseline (at most 60 s beyond the job's 3600).
        duration: { type: 'number', minimum: 0.5, maximum: 3660 },
        idleSeconds: spec('idleBaseline'),
        probe: {
          type: 'object',
          additionalProperties: false,
          required: ['interval', 'packetSize'],
          properties: { interval: { type: 'number', minimum: 1, maximum: 1000 }, packetSize: { type: 'integer', minimum: 40, maximum: 1472 } },
        },
        rr: {
          type: 'object',
          additionalProperties: false,
          required: ['requestSize', 'responseSize'],
          properties: { requestSize: { type: 'integer', minimum: 1, maximum: 1048576 }, responseSize: { type: 'integer', minimum: 1, maximum: 1048576 } },
        },
      },
    },
  },
  if: { properties: { role: { const: 'sender' } } },
  then: { required: ['peer', 'startAt'] },
};

let validate: ValidateFunction | undefined;

/** Why a task must not run, or null when it may: the schema above, and a peer that is an IP literal. */
export function taskProblems(task: unknown): string | null {
  validate ??= compileSchema(createAjv(), TASK_SCHEMA);
  if (!validate(task)) return fieldErrors(validate.errors, 'task').map((e) => `${e.field} ${e.message}`).join('; ');
  const tuning = (task as { tuning?: EndTuning }).tuning;
  const tuningProblems = tuning ? tuningErrors(tuning, 'task.tuning') : [];
  if (tuningProblems.length > 0) return tuningProblems.map((e) => `${e.field} ${e.message}`).join('; ');
  const peer = (task as { peer?: { address: string } }).peer;
  if (peer && isIP(peer.address) === 0) return 'task.peer.address is not an IP address';
  return null;
}
