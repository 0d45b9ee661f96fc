import type { AgentInterface } from './contract.js';

/** The address an end binds to on an interface: its IPv4 address, else a global IPv6 one. */
export function bindAddress(iface: AgentInterface): string | null {
  const v4 = iface.addresses.find((a) => a.family === 'IPv4');
  if (v4) return v4.address;
  return iface.addresses.find((a) => a.family === 'IPv6' && !a.address.startsWith('fe80'))?.address ?? null;
}

/** Up, or without a carrier state of its own (lo, some virtual interfaces). */
export function isUsable(iface: AgentInterface): boolean {
  return iface.operstate === 'up' || iface.operstate === 'unknown';
}
