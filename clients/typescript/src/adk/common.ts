// SPDX-License-Identifier: MIT
// What the three ADK services share: how they get their MemdClient, and
// telling memd's answers apart.

import { MemdClient, MemdError } from '../index.js';

/** How a service reaches memd: a MemdClient, or what makes one. */
export type MemdConnection =
  | { client: MemdClient; baseUrl?: never; apiKey?: never }
  | { client?: never; baseUrl: string; apiKey?: string };

/** The client the options give, or a new one for their baseUrl. */
export function clientOf(options: MemdConnection): MemdClient {
  if (options.client) return options.client;
  if (!options.baseUrl) throw new TypeError('memd ADK service: give client or baseUrl');
  return new MemdClient({ baseUrl: options.baseUrl, apiKey: options.apiKey });
}

/** Whether err is memd's answer with this HTTP status. */
export function isStatus(err: unknown, status: number): err is MemdError {
  return err instanceof MemdError && err.status === status;
}

/** The result of p, or undefined when memd answers 404. */
export async function orNotFound<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (isStatus(err, 404)) return undefined;
    throw err;
  }
}
