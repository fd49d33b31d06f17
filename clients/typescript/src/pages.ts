// SPDX-License-Identifier: MIT
// Async iteration over memd's paged lists: every item once, in the order
// memd pages them, following each page's cursor until it is null.

import { MemdError } from './transport.js';

/** One page, as the iterators see it: its items and where the next starts (null: none). */
export interface Page<T> {
  items: readonly T[];
  next: string | number | null | undefined;
}

/**
 * An AsyncIterable over every item of a paged list. fetchPage reads the
 * page params (with cursorName set to the previous page's `next` after
 * the first) names; split takes its items and cursor apart. Each
 * iteration starts again at the first page; a failing page rejects the
 * iteration with its MemdError. A page that names its own cursor as the
 * next (no progress) rejects with code `invalid_response` rather than
 * looping.
 */
export function pages<P extends object, R, T>(
  params: P,
  fetchPage: (params: P) => Promise<R>,
  split: (page: R) => Page<T>,
  cursorName: string,
): AsyncIterable<T> {
  return {
    async *[Symbol.asyncIterator]() {
      let cursor = (params as Record<string, unknown>)[cursorName] as Page<T>['next'];
      for (;;) {
        const query = cursor === undefined || cursor === null ? params : { ...params, [cursorName]: cursor };
        const page = split(await fetchPage(query));
        yield* page.items;
        if (page.next === null || page.next === undefined) return;
        if (page.next === cursor) {
          throw new MemdError({
            status: 0, code: 'invalid_response', retryable: false,
            message: `a page's next ${cursorName} is the one it was read at (${String(cursor)})`,
          });
        }
        cursor = page.next;
      }
    },
  };
}
