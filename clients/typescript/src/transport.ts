// SPDX-License-Identifier: MIT
// The HTTP transport under MemdClient: one request, with a timeout per
// attempt, the caller's AbortSignal, retries with backoff (Retry-After
// wins), and every failure as a MemdError. Each attempt is an Exchange:
// fetch (browsers, and wherever fetch is asked for), or node:http under
// Node (node_transport.ts). Web APIs only here (AbortController,
// setTimeout): runs in browsers and Node 18+.

import { uuidv7 } from './ids.js';

/** Client-side error codes (memd's own codes come from its error body). */
export type ClientErrorCode = 'network' | 'timeout' | 'aborted';

/** What a MemdError is made of. */
export interface MemdErrorInit {
  status: number;
  code: string;
  message: string;
  retryable: boolean;
  requestId?: string;
  body?: unknown;
  cause?: unknown;
}

/**
 * Every failure of a MemdClient call: a non-2xx answer from memd (status,
 * memd's error code, message and retryable flag), or the client's own
 * (status 0 and code `network`, `timeout` or `aborted`). `requestId` is
 * the request's X-Request-Id (the client sends one; memd echoes it).
 * `body` is the parsed error body (for a 409, what memd said of the
 * conflict, e.g. a turn's holder).
 */
export class MemdError extends Error {
  /** HTTP status; 0 when no answer came (network error, timeout, abort). */
  readonly status: number;
  /** memd's error code (`not_found`, `conflict`, ...) or `network`, `timeout`, `aborted`. */
  readonly code: string;
  /** Whether repeating the request may succeed (memd's flag, or the client's judgement). */
  readonly retryable: boolean;
  /** The request's X-Request-Id. */
  readonly requestId: string | undefined;
  /** The parsed error body, when memd sent one. */
  readonly body: unknown;

  constructor(init: MemdErrorInit) {
    super(init.message);
    this.name = 'MemdError';
    this.status = init.status;
    this.code = init.code;
    this.retryable = init.retryable;
    this.requestId = init.requestId;
    this.body = init.body;
    if (init.cause !== undefined) {
      Object.defineProperty(this, 'cause', { value: init.cause, enumerable: false, configurable: true, writable: true });
    }
  }
}

/** An answer's headers as the client reads them (fetch's Headers is one). */
export interface AnswerHeaders {
  /** The header's value (repeats joined with ", "), or null. */
  get(name: string): string | null;
}

/** A request body as an exchange sends it. */
export type ExchangeBody = Uint8Array | string | undefined;

/** One attempt's answer, read whole. */
export interface ExchangeAnswer {
  status: number;
  headers: AnswerHeaders;
  bytes: Uint8Array;
}

/** One attempt on its way: its answer, and a way to stop it (the answer then rejects). */
export interface Pending {
  answer: Promise<ExchangeAnswer>;
  cancel(reason?: unknown): void;
}

/**
 * Sends one request (target: path and query, appended to the base URL's
 * path) and reads its answer whole; the answer rejects on a network error
 * or a cancel. `headers` and `body` are the same object for every attempt
 * of a call: an exchange does not change them.
 */
export type Exchange = (
  method: string, target: string, headers: Record<string, string>, body: ExchangeBody,
) => Pending;

/** The Exchange over fetch f, to baseUrl (trailing slashes dropped). */
export function fetchExchange(f: typeof fetch, baseUrl: string): Exchange {
  const base = baseUrl.replace(/\/+$/, '');
  return (method, target, headers, body) => {
    const controller = new AbortController();
    const answer = (async (): Promise<ExchangeAnswer> => {
      const res = await f(base + target, {
        method,
        headers,
        body: body as BodyInit | undefined, /* Uint8Array<ArrayBufferLike>: every fetch takes it */
        signal: controller.signal,
      });
      /* The timeout covers the body too: a server that stalls mid-answer times out. */
      return { status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) };
    })();
    return { answer, cancel: (reason) => controller.abort(reason) };
  };
}

/** The transport's settings (MemdClient's constructor options, resolved). */
export interface TransportConfig {
  apiKey?: string;
  timeoutMs: number;
  retries: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** How each attempt goes (fetchExchange, or NodeExchange's). */
  exchange: Exchange;
  headers: Record<string, string>;
}

/** One request as the client builds it. */
export interface TransportRequest {
  method: string;
  /** Path and query, starting with `/`. */
  target: string;
  headers?: Record<string, string>;
  body?: Uint8Array | Blob | string;
  /**
   * True when sending the request again after an answer was lost (a network
   * error, a timeout) cannot do it twice: reads, deletes, and writes made
   * idempotent by client-made ids. Answers 503 and 429 are retried for
   * every request: memd wrote nothing.
   */
  repeatable: boolean;
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** An answer (2xx or not) read whole. */
export interface TransportResponse {
  status: number;
  headers: AnswerHeaders;
  bytes: Uint8Array;
  requestId: string;
  /** True when an earlier attempt may have reached memd and done its work. */
  earlierAttemptUnknown: boolean;
}

/** A UTF-8 decoder for every answer (decode() without stream keeps no state between calls). */
export const UTF8 = new TextDecoder();

/** Retry-After is honoured up to this long, so a wrong header cannot park a caller for hours. */
export const RETRY_AFTER_MAX_MS = 60_000;

/** Codes for answers whose body is not memd's JSON error (an HTTP library's or a proxy's). */
const STATUS_CODES: Record<number, string> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  409: 'conflict',
  413: 'too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  429: 'too_many_requests',
  431: 'headers_too_large',
  500: 'internal',
  501: 'not_supported',
  503: 'unavailable',
};

/**
 * The delay a Retry-After header asks for, in ms (delta-seconds or an
 * HTTP date), capped at RETRY_AFTER_MAX_MS; undefined when absent or
 * unreadable.
 */
export function retryAfterMs(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  let ms: number;
  if (/^\d+$/.test(v)) {
    ms = Number(v) * 1000;
  } else {
    const t = Date.parse(v);
    if (Number.isNaN(t)) return undefined;
    ms = Math.max(0, t - now);
  }
  return Math.min(ms, RETRY_AFTER_MAX_MS);
}

/** Full-jitter exponential backoff: a random delay in [0, min(max, base * 2^attempt)). */
export function backoffMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.random() * Math.min(maxMs, baseMs * 2 ** attempt);
}

function abortedError(requestId: string, signal: AbortSignal): MemdError {
  return new MemdError({
    status: 0,
    code: 'aborted',
    message: 'the request was aborted',
    retryable: false,
    requestId,
    cause: signal.reason,
  });
}

/* Waits ms, or until signal aborts (then rejects with code aborted). */
function sleep(ms: number, signal: AbortSignal | undefined, requestId: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortedError(requestId, signal));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(requestId, signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function headerValue(headers: Record<string, string>, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const k of Object.keys(headers)) if (k.toLowerCase() === lower) return headers[k];
  return undefined;
}

/** The MemdError for a non-2xx answer: memd's error body when it sent one. */
export function answerError(res: TransportResponse): MemdError {
  let body: unknown;
  let text = '';
  try {
    text = UTF8.decode(res.bytes);
    body = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  const err = (body as { error?: { code?: unknown; message?: unknown; retryable?: unknown } } | undefined)?.error;
  if (err && typeof err.code === 'string') {
    return new MemdError({
      status: res.status,
      code: err.code,
      message: typeof err.message === 'string' ? err.message : `HTTP ${res.status}`,
      retryable: typeof err.retryable === 'boolean' ? err.retryable : res.status === 503 || res.status === 429,
      requestId: res.requestId,
      body,
    });
  }
  const snippet = text.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 200);
  return new MemdError({
    status: res.status,
    code: STATUS_CODES[res.status] ?? 'http_error',
    message: `HTTP ${res.status}${snippet ? `: ${snippet}` : ''}`,
    retryable: res.status === 503 || res.status === 429,
    requestId: res.requestId,
    body: body ?? (text || undefined),
  });
}

/**
 * Sends req to memd and reads the answer whole. Retries (at most
 * config.retries more attempts) a 503 or 429 after Retry-After (else the
 * backoff), and a network error or timeout with backoff when
 * req.repeatable. Resolves to the answer, 2xx or not, of the last
 * attempt; rejects with MemdError code `network` or `timeout` (status 0)
 * when no attempt got an answer, and `aborted` as soon as req.signal
 * aborts (no retry after that).
 */
export async function send(config: TransportConfig, req: TransportRequest): Promise<TransportResponse> {
  const headers: Record<string, string> = { ...config.headers, ...req.headers };
  if (config.apiKey !== undefined && headerValue(headers, 'authorization') === undefined) {
    headers['Authorization'] = `Bearer ${config.apiKey}`;
  }
  /* One id for every attempt, so memd's log ties them together. */
  let requestId = headerValue(headers, 'x-request-id');
  if (requestId === undefined) {
    requestId = uuidv7();
    headers['X-Request-Id'] = requestId;
  }
  const timeoutMs = req.timeoutMs ?? config.timeoutMs;
  const userSignal = req.signal;
  let earlierAttemptUnknown = false;
  /* A Blob is read once, not once an attempt. */
  const body: ExchangeBody = typeof Blob !== 'undefined' && req.body instanceof Blob
    ? new Uint8Array(await req.body.arrayBuffer())
    : req.body as ExchangeBody;

  for (let attempt = 0; ; attempt++) {
    if (userSignal?.aborted) throw abortedError(requestId, userSignal);
    let timedOut = false;
    const pending = config.exchange(req.method, req.target, headers, body);
    const onAbort = () => pending.cancel(userSignal!.reason);
    userSignal?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      pending.cancel();
    }, timeoutMs);
    let res: ExchangeAnswer;
    try {
      /* The timeout covers the body too: a server that stalls mid-answer times out. */
      res = await pending.answer;
    } catch (cause) {
      if (userSignal?.aborted) throw abortedError(requestId, userSignal);
      const error = new MemdError({
        status: 0,
        code: timedOut ? 'timeout' : 'network',
        message: timedOut
          ? `no answer from ${req.method} ${req.target} within ${timeoutMs} ms`
          : `${req.method} ${req.target}: ${cause instanceof Error ? cause.message : String(cause)}`,
        retryable: req.repeatable,
        requestId,
        cause,
      });
      if (!req.repeatable || attempt >= config.retries) throw error;
      earlierAttemptUnknown = true;
      await sleep(backoffMs(attempt, config.retryBaseMs, config.retryMaxMs), userSignal, requestId);
      continue;
    } finally {
      clearTimeout(timer);
      userSignal?.removeEventListener('abort', onAbort);
    }
    const answer: TransportResponse = {
      status: res.status,
      headers: res.headers,
      bytes: res.bytes,
      requestId: res.headers.get('x-request-id') ?? requestId,
      earlierAttemptUnknown,
    };
    if ((res.status === 503 || res.status === 429) && attempt < config.retries) {
      const wait = retryAfterMs(res.headers.get('retry-after')) ??
        backoffMs(attempt, config.retryBaseMs, config.retryMaxMs);
      await sleep(wait, userSignal, requestId);
      continue;
    }
    return answer;
  }
}
