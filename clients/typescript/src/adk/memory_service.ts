// SPDX-License-Identifier: MIT
// MemdMemoryService: ADK's memory service on memd. memd indexes every
// event as it is appended, so a session is searchable without being
// added; addSessionToMemory asks memd to extract the session's long-term
// memories now (what memd's memory worker does on its own later), and
// searchMemory searches the user's events and memories.

import type { BaseMemoryService, MemoryEntry, SearchMemoryRequest, SearchMemoryResponse, Session } from '@google/adk';
import type { Body, MemdClient } from '../index.js';
import { clientOf, isStatus, type MemdConnection } from './common.js';

/** Results searchMemory asks memd for unless told. */
const DEFAULT_RESULTS = 10;

export type MemdMemoryServiceOptions = MemdConnection & {
  /** Results per search, at most (memd's k; default 10). */
  results?: number;
  /** memd's search mode (keyword, vector, hybrid; default: memd's index.default_mode). */
  mode?: 'keyword' | 'vector' | 'hybrid';
};


export class MemdMemoryService implements BaseMemoryService {
  readonly memd: MemdClient;
  readonly results: number;
  readonly mode?: 'keyword' | 'vector' | 'hybrid';

  constructor(options: MemdMemoryServiceOptions) {
    this.memd = clientOf(options);
    this.results = options.results ?? DEFAULT_RESULTS;
    this.mode = options.mode;
  }

  /** Extracts the session's long-term memories now (memd's extractor of
   * the app). An app whose extraction is off (memd answers 501) has
   * nothing to add: its events are searchable already. */
  async addSessionToMemory(session: Session): Promise<void> {
    try {
      await this.memd.extractMemories({ app: session.appName, user: session.userId, sid: session.id });
    } catch (err) {
      if (!isStatus(err, 501)) throw err;
    }
  }

  /** The user's events and memories that match query, best first: an
   * event as its text with its role (user, else model) and author, a
   * memory as its text, author "memory". */
  async searchMemory({ appName, userId, query }: SearchMemoryRequest): Promise<SearchMemoryResponse> {
    const body: Body<'search'> = { query, k: this.results };
    if (this.mode) body.mode = this.mode;
    const res = await this.memd.search({ app: appName, user: userId }, body);
    const memories: MemoryEntry[] = res.results.map((h) => {
      if (h.source === 'memory')
        return { content: { role: 'user', parts: [{ text: h.text }] }, author: 'memory', timestamp: h.updated };
      const entry: MemoryEntry = {
        content: { role: h.role === 'user' || h.role === 'tool' ? 'user' : 'model', parts: [{ text: h.text }] },
        timestamp: h.timestamp,
      };
      if (h.author) entry.author = h.author;
      return entry;
    });
    return { memories };
  }
}
