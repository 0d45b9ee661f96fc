/** niclab's version, reported by agents and the API. */
export const VERSION = '0.1.0';
