// SPDX-License-Identifier: MIT
// The Node-native exchange under MemdClient: one request over node:http
// (or node:https) through a keep-alive Agent the client owns, the answer
// read whole. Under Node it costs well under half of fetch's CPU per
// request (undici's streams, Headers and Response objects). node:http and
// node:https are imported on the first request, with a dynamic import
// that bundlers leave alone, so that a browser bundle of the main entry
// neither resolves nor loads them. The client has no streaming route
// (no watch, no SSE), so every request goes through here under Node.

import type * as Http from 'node:http';
import type { AnswerHeaders, Exchange, ExchangeAnswer, ExchangeBody, Pending } from './transport.js';

/**
 * How long an idle kept-alive connection stays open (ms): below memd's
 * default header_timeout_s (10 s), after which memd closes an idle
 * connection, so that the client, not memd, closes it first and a
 * request is not sent on a connection memd is closing.
 */
export const IDLE_CONNECTION_MS = 4_000;

/** Whether this runtime is Node itself (not Bun or Deno, whose own fetch is native). */
export function isNode(): boolean {
  const p = (globalThis as { process?: { versions?: Record<string, string | undefined> } }).process;
  return typeof p?.versions?.node === 'string' && p.versions.bun === undefined &&
    (globalThis as { Deno?: unknown }).Deno === undefined;
}

/* The answer's headers as node:http parsed them (names lowercased, repeats
 * joined with ", " but Set-Cookie's): what fetch's Headers.get returns. */
class NodeHeaders implements AnswerHeaders {
  constructor(private readonly h: Http.IncomingHttpHeaders) {}

  get(name: string): string | null {
    const v = this.h[name.toLowerCase()];
    if (v === undefined) return null;
    return typeof v === 'string' ? v : v.join(', ');
  }
}

/* What a client's first request loads. */
interface Loaded {
  request: typeof Http.request;
  agent: Http.Agent;
}

/**
 * The node:http exchange of one client: baseUrl's host, port and path
 * prefix parsed once, the Agent made on the first request (at most
 * maxConnections sockets, kept alive IDLE_CONNECTION_MS). close()
 * destroys its sockets.
 */
export class NodeExchange {
  readonly #secure: boolean;
  readonly #hostname: string;
  readonly #port: number;
  readonly #prefix: string;
  readonly #maxConnections: number;
  #loaded: Loaded | undefined;
  #loading: Promise<Loaded> | undefined;

  /** Throws TypeError when baseUrl is not an http: or https: URL. */
  constructor(baseUrl: string, maxConnections: number) {
    const u = new URL(baseUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new TypeError(`MemdClient: baseUrl ${baseUrl} is neither http: nor https:`);
    }
    this.#secure = u.protocol === 'https:';
    /* URL keeps an IPv6 literal's brackets; node:http wants them off. */
    this.#hostname = u.hostname.replace(/^\[(.*)\]$/, '$1');
    this.#port = u.port !== '' ? Number(u.port) : this.#secure ? 443 : 80;
    this.#prefix = u.pathname.replace(/\/+$/, '');
    this.#maxConnections = maxConnections;
  }

  /* node:http or node:https and an Agent, once. */
  #load(): Promise<Loaded> {
    this.#loading ??= (this.#secure
      ? import(/* webpackIgnore: true */ /* @vite-ignore */ 'node:https')
      : import(/* webpackIgnore: true */ /* @vite-ignore */ 'node:http')
    ).then((mod) => {
      const m = (mod as { default?: typeof Http }).default ?? (mod as unknown as typeof Http);
      const agent = new m.Agent({
        keepAlive: true,
        maxSockets: this.#maxConnections,
        maxFreeSockets: this.#maxConnections,
        timeout: IDLE_CONNECTION_MS,
        scheduling: 'lifo',
      });
      this.#loaded = { request: m.request, agent };
      return this.#loaded;
    });
    return this.#loading;
  }

  /** The Exchange: sends on the loaded Agent, or loads it first (the first requests). */
  readonly exchange: Exchange = (method, target, headers, body) => {
    if (this.#loaded) return this.#send(this.#loaded, method, target, headers, body);
    let cancelled: unknown;
    let inner: Pending | undefined;
    let rejectEarly!: (e: unknown) => void;
    const early = new Promise<never>((_, reject) => { rejectEarly = reject; });
    const answer = Promise.race([early, this.#load().then((l) => {
      if (cancelled !== undefined) throw cancelled;
      inner = this.#send(l, method, target, headers, body);
      return inner.answer;
    })]);
    return {
      answer,
      cancel: () => {
        if (inner) {
          inner.cancel();
          return;
        }
        cancelled = new Error('the request was cancelled');
        rejectEarly(cancelled);
      },
    };
  };

  #send(l: Loaded, method: string, target: string, headers: Record<string, string>, body: ExchangeBody): Pending {
    let req: Http.ClientRequest;
    let resolve!: (a: ExchangeAnswer) => void;
    let reject!: (e: unknown) => void;
    const answer = new Promise<ExchangeAnswer>((res, rej) => { resolve = res; reject = rej; });
    try {
      req = l.request({
        agent: l.agent, hostname: this.#hostname, port: this.#port, path: this.#prefix + target, method, headers,
      });
    } catch (e) {
      /* An invalid header name or value: as fetch, a rejection. */
      reject(e);
      return { answer, cancel: () => {} };
    }
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Uint8Array[] = [];
      let length = 0;
      res.on('data', (c: Uint8Array) => {
        chunks.push(c);
        length += c.byteLength;
      });
      res.on('error', reject);
      res.on('close', () => {
        if (!res.complete) reject(new Error('the connection closed in the middle of the answer'));
      });
      res.on('end', () => {
        /* One copy into a buffer of the answer's own (not a slice of
         * Node's pool), as fetch's arrayBuffer() gives. */
        const bytes = new Uint8Array(length);
        let at = 0;
        for (const c of chunks) {
          bytes.set(c, at);
          at += c.byteLength;
        }
        resolve({ status: res.statusCode ?? 0, headers: new NodeHeaders(res.headers), bytes });
      });
    });
    /* end(body) before the headers went: Node sends Content-Length (0 without a body), never chunks. */
    req.end(body);
    return {
      answer,
      cancel: () => {
        const e = new Error('the request was cancelled');
        reject(e);
        req.destroy(e);
      },
    };
  }

  /** Destroys the Agent's sockets, idle and busy (requests on them fail); later requests open new ones. */
  async close(): Promise<void> {
    if (!this.#loading) return;
    (await this.#loading).agent.destroy();
  }
}
