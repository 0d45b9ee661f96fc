/**
 * Patterns for every name that reaches a child process or a file path on an agent.
 * openapi.yaml carries the same patterns (a test keeps them equal); the agent checks again.
 */
export const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
export const INTERFACE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,14}$/;

export function isInterfaceName(value: unknown): value is string {
  return typeof value === 'string' && INTERFACE_NAME.test(value) && value !== '.' && value !== '..';
}
