/** What a page is given: where to draw, its route's parts, and a signal that ends it. */
export interface PageContext {
  root: HTMLElement;
  /** The route's path parts after the page's name (`#/jobs/ID` gives `['ID']`). */
  args: string[];
  query: URLSearchParams;
  /** Aborted when the page is left: it ends the page's streams, requests and timers. */
  signal: AbortSignal;
  /** Shows an error of the API (a 401 as "a token is needed"); ignores aborts. */
  fail(error: unknown): void;
  /** Calls `fn` now and every `ms` until the page is left. */
  every(ms: number, fn: () => Promise<void>): void;
}

export type Page = (context: PageContext) => Promise<void>;
