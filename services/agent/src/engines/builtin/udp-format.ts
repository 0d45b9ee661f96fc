import { BUILTIN_UDP_HEADER_BYTES } from '@niclab/shared/domain/engine-rules';

/** The builtin engine's UDP datagram: a header, then padding up to packetSize. */
export const MAGIC = 0x4e49434c; // "NICL"
export const DATA = 0;
export const FIN = 1;
/** magic, leg token, kind, sequence number, send time (µs since the epoch). */
export const HEADER_BYTES = BUILTIN_UDP_HEADER_BYTES;
