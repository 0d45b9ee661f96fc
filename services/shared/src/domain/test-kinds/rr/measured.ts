import type { RrFigures } from '../../contract.js';

/** What the requesting end of an rr flow measured: its transactions and their round trips. */
export interface RrMeasured {
  rr: RrFigures;
}
