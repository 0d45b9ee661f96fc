import { BUILTIN_UDP_HEADER_BYTES } from '@niclab/shared/domain/engine-rules';

/**
 * The builtin engine's UDP datagram: a header, then padding up to packetSize. The header, big
 * endian: magic (u32), leg token (u32), stream (u16), kind (u16), sequence number (f64), send
 * time (f64, µs since the epoch). Stream 0's header is the one of the engine before it had
 * streams (kind a u32).
 */
export const MAGIC = 0x4e49434c; // "NICL"
export const DATA = 0;
export const FIN = 1;
export const HEADER_BYTES = BUILTIN_UDP_HEADER_BYTES;
