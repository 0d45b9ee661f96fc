import { BUILTIN_UDP_HEADER_BYTES } from '@niclab/shared/domain/engine-rules';

/**
 * The builtin engine's UDP datagram: a header, then padding up to packetSize. The header, big
 * endian: magic (u32), leg token (u32), stream (u16), kind (u16), sequence number (f64; a FIN
 * carries how many datagrams its stream sent), send time (f64, µs since the epoch). Stream 0's
 * header is the one of the engine before it had streams (kind a u32).
 */
export const MAGIC = 0x4e49434c; // "NICL"
export const DATA = 0;
export const FIN = 1;
export const HEADER_BYTES = BUILTIN_UDP_HEADER_BYTES;
/** A sender ends each stream with this many FINs, FIN_GAP_MS apart: any one ends the receiver's wait for it. */
export const FIN_COUNT = 5;
export const FIN_GAP_MS = 10;
