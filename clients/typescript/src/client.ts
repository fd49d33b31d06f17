// SPDX-License-Identifier: MIT
// MemdClient: one method per operation of memd's REST API (api/openapi.yaml,
// but for the MCP transport's), named by its operationId and typed from the
// generated types: `memd.OPERATION(params, body?, options?)`.

import { uuidv7 } from './ids.js';
import { pages } from './pages.js';
import type {
  Body, CallOptions, ClientOperation, Options, Params, Result, RouteOf, Schemas, WithContext, WithoutContext,
} from './types.js';
import { isNode, NodeExchange } from './node_transport.js';
import {
  answerError, fetchExchange, MemdError, send, UTF8, type TransportConfig, type TransportResponse,
} from './transport.js';

/** MemdClient's constructor options. */
export interface MemdClientOptions {
  /** memd's base URL, e.g. `http://127.0.0.1:8700`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Per attempt, in ms (default 30000). */
  timeoutMs?: number;
  /** Extra attempts after the first (default 3). */
  retries?: number;
  /** Backoff base in ms (default 200): attempt n waits a random time below min(retryMaxMs, retryBaseMs * 2^n). */
  retryBaseMs?: number;
  /** Backoff cap in ms (default 5000). Retry-After, when memd sends it, wins (up to 60 s). */
  retryMaxMs?: number;
  /** The fetch to use (default globalThis.fetch); giving one makes the transport fetch. */
  fetch?: typeof fetch;
  /**
   * How requests go: `node` through node:http / node:https with a
   * keep-alive Agent of the client's own (Node only; less than half of
   * fetch's CPU per request), `fetch` through fetch, `auto` (default)
   * `node` under Node when no `fetch` is given, else `fetch`.
   */
  transport?: 'auto' | 'fetch' | 'node';
  /**
   * The node transport's connections to memd at most (default 64, well
   * below memd's default server.max_connections_per_ip of 256); more
   * requests at once wait for one to be free.
   */
  maxConnections?: number;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

/** An artifact version's bytes as getArtifact returns them. */
export interface ArtifactData {
  data: Uint8Array;
  contentType: string;
  version: number;
  created: string;
}

/** What putArtifact stores: bytes, a Blob, or a string (stored as UTF-8). */
export type ArtifactInput = Uint8Array | ArrayBuffer | Blob | string;

/** putArtifact's options: the media type (default: the Blob's type, text/plain for a string, else application/octet-stream). */
export type PutArtifactOptions = Options<'putArtifact'> & { contentType?: string };

export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_RETRIES = 3;
export const DEFAULT_RETRY_BASE_MS = 200;
export const DEFAULT_RETRY_MAX_MS = 5_000;
export const DEFAULT_MAX_CONNECTIONS = 64;

/**
 * Where each operation lives. Typed against the generated `paths`: an
 * entry naming a route that is not its operation's does not compile, nor
 * does the table when the spec gains an operation it lacks.
 */
const ROUTES: { readonly [O in ClientOperation]: RouteOf<O> } = {
  healthz: ['get', '/healthz'],
  readyz: ['get', '/readyz'],
  openapi: ['get', '/openapi.json'],
  metrics: ['get', '/metrics'],
  listPlugins: ['get', '/v1/plugins'],
  deleteUser: ['delete', '/v1/apps/{app}/users/{user}'],
  listSessions: ['get', '/v1/apps/{app}/users/{user}/sessions'],
  createSession: ['post', '/v1/apps/{app}/users/{user}/sessions'],
  getSession: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}'],
  deleteSession: ['delete', '/v1/apps/{app}/users/{user}/sessions/{sid}'],
  patchSession: ['patch', '/v1/apps/{app}/users/{user}/sessions/{sid}'],
  listEvents: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/events'],
  appendEvents: ['post', '/v1/apps/{app}/users/{user}/sessions/{sid}/events'],
  clearEvents: ['delete', '/v1/apps/{app}/users/{user}/sessions/{sid}/events'],
  getContext: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/context'],
  getState: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/state'],
  patchState: ['patch', '/v1/apps/{app}/users/{user}/sessions/{sid}/state'],
  rewindSession: ['post', '/v1/apps/{app}/users/{user}/sessions/{sid}:rewind'],
  getMessages: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/messages'],
  replaceMessages: ['put', '/v1/apps/{app}/users/{user}/sessions/{sid}/messages'],
  appendMessages: ['post', '/v1/apps/{app}/users/{user}/sessions/{sid}/messages'],
  listOperations: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/operations'],
  undoOperation: ['post', '/v1/apps/{app}/users/{user}/sessions/{sid}/operations/{op}:undo'],
  getStateHistory: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/state/history'],
  endInvocation: ['post', '/v1/apps/{app}/users/{user}/sessions/{sid}/invocations/{invocation}:end'],
  listArtifacts: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/artifacts'],
  getArtifact: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}'],
  putArtifact: ['put', '/v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}'],
  deleteArtifact: ['delete', '/v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}'],
  listArtifactVersions: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}/versions'],
  search: ['post', '/v1/apps/{app}/users/{user}/search'],
  rebuildIndex: ['post', '/v1/apps/{app}/users/{user}/index:rebuild'],
  listMemories: ['get', '/v1/apps/{app}/users/{user}/memories'],
  createMemory: ['post', '/v1/apps/{app}/users/{user}/memories'],
  getMemory: ['get', '/v1/apps/{app}/users/{user}/memories/{mid}'],
  deleteMemory: ['delete', '/v1/apps/{app}/users/{user}/memories/{mid}'],
  updateMemory: ['patch', '/v1/apps/{app}/users/{user}/memories/{mid}'],
  getMemoryHistory: ['get', '/v1/apps/{app}/users/{user}/memories/{mid}/history'],
  listJobs: ['get', '/v1/apps/{app}/jobs'],
  getJob: ['get', '/v1/apps/{app}/jobs/{job}'],
  cancelJob: ['delete', '/v1/apps/{app}/jobs/{job}'],
  resolveLane: ['post', '/v1/apps/{app}/lanes:resolve'],
  openLaneBySource: ['post', '/v1/apps/{app}/lanes:open'],
  listAppLanes: ['get', '/v1/apps/{app}/lanes'],
  listLanes: ['get', '/v1/apps/{app}/users/{user}/lanes'],
  getLane: ['get', '/v1/apps/{app}/users/{user}/lanes/{key}'],
  deleteLane: ['delete', '/v1/apps/{app}/users/{user}/lanes/{key}'],
  openLane: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}:open'],
  resetLane: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}:reset'],
  switchLane: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}:switch'],
  suspendLane: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}:suspend'],
  beginTurn: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}/turns'],
  heartbeatTurn: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}/turns/{turn}:heartbeat'],
  endTurn: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}/turns/{turn}:end'],
  listInbox: ['get', '/v1/apps/{app}/users/{user}/lanes/{key}/inbox'],
  putInbox: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}/inbox'],
  takeInbox: ['post', '/v1/apps/{app}/users/{user}/lanes/{key}/inbox:take'],
  sweepLanes: ['post', '/v1/lanes:sweep'],
  extractMemories: ['post', '/v1/apps/{app}/users/{user}/sessions/{sid}/memories:extract'],
  sweepMemories: ['post', '/v1/memories:sweep'],
  listTasks: ['get', '/v1/apps/{app}/tasks'],
  getTask: ['get', '/v1/apps/{app}/tasks/{tid}'],
  putTask: ['put', '/v1/apps/{app}/tasks/{tid}'],
  deleteTask: ['delete', '/v1/apps/{app}/tasks/{tid}'],
  putCheckpoint: ['put', '/v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}'],
  getCheckpoint: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}'],
  putCheckpointWrites: ['post', '/v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}/writes'],
  getLatestCheckpoint: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints:latest'],
  listSessionCheckpoints: ['get', '/v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints'],
  deleteCheckpoints: ['delete', '/v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints'],
  listCheckpoints: ['get', '/v1/apps/{app}/users/{user}/checkpoints'],
  listResumableRuns: ['get', '/v1/apps/{app}/checkpoints:resumable'],
};

/** The operations MemdClient has a method for, in the spec's order. */
export const OPERATIONS: readonly ClientOperation[] = Object.keys(ROUTES) as ClientOperation[];

/* An operation's path template split once: the text around its
 * parameters (parts, one more than names) and the parameters' names. */
interface PathTemplate {
  parts: string[];
  names: string[];
}
const PATHS = new Map<ClientOperation, PathTemplate>();
function pathOf(op: ClientOperation): PathTemplate {
  let t = PATHS.get(op);
  if (!t) {
    const pieces = ROUTES[op][1].split(/\{([^}]+)\}/);
    t = { parts: pieces.filter((_, i) => i % 2 === 0), names: pieces.filter((_, i) => i % 2 === 1) };
    PATHS.set(op, t);
  }
  return t;
}

/* POSTs the client may repeat after a lost answer: the read-only ones, and
 * the writes whose ids it fills in, which make a second attempt a replay. */
const IDEMPOTENT_WRITES: ReadonlySet<ClientOperation> = new Set<ClientOperation>([
  'search', 'resolveLane', 'appendEvents', 'appendMessages', 'createSession', 'createMemory',
  'putCheckpointWrites',
]);

/* DELETEs answered 204: a 404 on a retry after an attempt whose answer was
 * lost means that attempt deleted it, so the call is done. */
const GONE_IS_DONE: ReadonlySet<ClientOperation> = new Set<ClientOperation>([
  'deleteUser', 'deleteSession', 'deleteArtifact', 'deleteMemory', 'deleteLane', 'deleteTask',
]);

/* PUTs that save the whole resource: repeating one unconditional save
 * after a lost answer saves the same content again (a checkpoint put
 * again keeps its created time and pending writes). */
const IDEMPOTENT_PUTS: ReadonlySet<ClientOperation> = new Set<ClientOperation>([
  'putTask', 'putCheckpoint',
]);

type AnyOptions = CallOptions & { ifMatch?: string | number; ifNoneMatch?: '*' };

/**
 * A client of one memd server. Every method resolves to memd's parsed
 * JSON answer (undefined for 204) or rejects with MemdError.
 */
export class MemdClient {
  readonly #config: TransportConfig;
  /* The node transport's exchange (its Agent), when requests go through it. */
  readonly #node: NodeExchange | undefined;

  constructor(options: MemdClientOptions) {
    if (!options || typeof options.baseUrl !== 'string' || options.baseUrl === '') {
      throw new TypeError('MemdClient: baseUrl is required');
    }
    const transport = options.transport ?? 'auto';
    if (transport !== 'auto' && transport !== 'fetch' && transport !== 'node') {
      throw new TypeError(`MemdClient: transport must be 'auto', 'fetch' or 'node', not ${String(transport)}`);
    }
    const maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    if (!Number.isInteger(maxConnections) || maxConnections < 1) {
      throw new TypeError(`MemdClient: maxConnections must be a positive integer, not ${String(maxConnections)}`);
    }
    if (transport === 'node') {
      if (options.fetch !== undefined) throw new TypeError("MemdClient: transport 'node' takes no fetch");
      if (!isNode()) throw new TypeError("MemdClient: transport 'node' needs Node");
    }
    if (transport === 'node' || (transport === 'auto' && options.fetch === undefined && isNode())) {
      this.#node = new NodeExchange(options.baseUrl, maxConnections);
    } else {
      const f = options.fetch ?? globalThis.fetch;
      if (typeof f !== 'function') throw new TypeError('MemdClient: no fetch (pass options.fetch)');
    }
    this.#config = {
      apiKey: options.apiKey,
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      retries: options.retries ?? DEFAULT_RETRIES,
      retryBaseMs: options.retryBaseMs ?? DEFAULT_RETRY_BASE_MS,
      retryMaxMs: options.retryMaxMs ?? DEFAULT_RETRY_MAX_MS,
      /* Bound: a bare window.fetch called as a method of another object throws "Illegal invocation". */
      exchange: this.#node?.exchange ?? fetchExchange(options.fetch ?? globalThis.fetch.bind(globalThis), options.baseUrl),
      headers: { ...options.headers },
    };
  }

  /** The transport requests go through: `node` or `fetch`. */
  get transport(): 'node' | 'fetch' {
    return this.#node ? 'node' : 'fetch';
  }

  /**
   * Closes the node transport's connections to memd, idle and busy (a
   * call in flight loses its attempt, as on a dropped connection); a later
   * call opens new ones.
   * Nothing to do with fetch. Idle kept-alive connections do not keep a
   * Node process alive, so a program may end without calling it.
   */
  async close(): Promise<void> {
    await this.#node?.close();
  }

  /* The request target of op: path parameters substituted (percent-encoded),
   * every other defined parameter in the query. */
  #target(op: ClientOperation, params: object | undefined): string {
    const route = pathOf(op);
    const p = (params ?? {}) as Record<string, unknown>;
    let path = route.parts[0];
    for (let i = 0; i < route.names.length; i++) {
      const value = p[route.names[i]];
      if (value === undefined || value === null || value === '') {
        throw new TypeError(`${op}: the path parameter ${route.names[i]} is required`);
      }
      path += encodeURIComponent(String(value)) + route.parts[i + 1];
    }
    let query = '';
    for (const k of Object.keys(p)) {
      const v = p[k];
      if (v === undefined || v === null || route.names.includes(k)) continue;
      query += `${query ? '&' : '?'}${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`;
    }
    return path + query;
  }

  /* Sends op and resolves to the answer, 2xx or not. */
  async #send(
    op: ClientOperation, params: object | undefined, body: BodyInitish | undefined,
    contentType: string | undefined, options: AnyOptions | undefined,
  ): Promise<TransportResponse> {
    const [method] = ROUTES[op];
    const headers: Record<string, string> = { Accept: 'application/json', ...options?.headers };
    if (contentType !== undefined) headers['Content-Type'] = contentType;
    if (options?.ifMatch !== undefined) {
      headers['If-Match'] = typeof options.ifMatch === 'number' ? `"${options.ifMatch}"` : options.ifMatch;
    }
    if (options?.ifNoneMatch !== undefined) headers['If-None-Match'] = options.ifNoneMatch;
    return send(this.#config, {
      method: method.toUpperCase(),
      target: this.#target(op, params),
      headers,
      body,
      repeatable: method === 'get' || method === 'delete' || IDEMPOTENT_WRITES.has(op) ||
        (IDEMPOTENT_PUTS.has(op) && options?.ifMatch === undefined && options?.ifNoneMatch === undefined),
      signal: options?.signal,
      timeoutMs: options?.timeoutMs,
    });
  }

  /* A call with a JSON body (or none): the parsed 2xx answer, else MemdError. */
  private async call<O extends ClientOperation>(
    op: O, params: object | undefined, body: unknown, options: AnyOptions | undefined,
  ): Promise<Result<O>> {
    const res = await this.#send(op, params, body === undefined ? undefined : JSON.stringify(body),
      body === undefined ? undefined : 'application/json', options);
    if (res.status === 404 && res.earlierAttemptUnknown && GONE_IS_DONE.has(op)) {
      return undefined as Result<O>;
    }
    if (res.status >= 300) throw answerError(res);
    return decode(res) as Result<O>;
  }

  /* As call, but a 409 after an attempt whose answer was lost gives the
   * raw answer to the caller, which knows how to resolve it. */
  async #callResolving<O extends ClientOperation>(
    op: O, params: object | undefined, body: unknown, options: AnyOptions | undefined,
  ): Promise<{ value: Result<O> } | { lostConflict: MemdError }> {
    const res = await this.#send(op, params, JSON.stringify(body), 'application/json', options);
    if (res.status >= 300) {
      const error = answerError(res);
      if (res.status === 409 && res.earlierAttemptUnknown) return { lostConflict: error };
      throw error;
    }
    return { value: decode(res) as Result<O> };
  }

  // ---- Special cases: client-made ids, bytes, text -------------------------

  /**
   * POST /v1/apps/{app}/users/{user}/sessions: Create a session. A missing
   * `id` is filled with a UUIDv7 before the first attempt, so the call is
   * retried after a lost answer; a 409 on such a retry (the lost attempt
   * created it) is answered by reading the session back.
   */
  async createSession(
    params: Params<'createSession'>, body?: Body<'createSession'>, options?: Options<'createSession'>,
  ): Promise<Result<'createSession'>> {
    const full = { ...body, id: body?.id ?? uuidv7() };
    const r = await this.#callResolving('createSession', params, full, options);
    if ('value' in r) return r.value;
    return this.getSession({ app: params.app, user: params.user, sid: full.id }, {
      signal: options?.signal, timeoutMs: options?.timeoutMs, headers: options?.headers,
    });
  }

  /**
   * POST .../sessions/{sid}/events: Append events and a state delta in one
   * atomic transaction. Every event without an `id` gets a UUIDv7 before
   * the first attempt, so a retry after a lost answer is a replay
   * (`replayed: true`), never a second copy. With `return: 'context'` the
   * answer also holds the context right after this append (`format`,
   * `include_text`, `query` as getContext's), typed by the format: one
   * round trip per agent step.
   */
  appendEvents(
    params: Params<'appendEvents'> & { return: 'context'; format: 'openai' }, body: Body<'appendEvents'>,
    options?: Options<'appendEvents'>,
  ): Promise<WithContext<Schemas['AppendResult'], Schemas['OpenAIContext']>>;
  appendEvents(
    params: Params<'appendEvents'> & { return: 'context'; format?: undefined }, body: Body<'appendEvents'>,
    options?: Options<'appendEvents'>,
  ): Promise<WithContext<Schemas['AppendResult'], Schemas['Context']>>;
  appendEvents(
    params: Params<'appendEvents'> & { return?: undefined }, body: Body<'appendEvents'>,
    options?: Options<'appendEvents'>,
  ): Promise<WithoutContext<Schemas['AppendResult']>>;
  appendEvents(
    params: Params<'appendEvents'>, body: Body<'appendEvents'>, options?: Options<'appendEvents'>,
  ): Promise<Result<'appendEvents'>>;
  appendEvents(
    params: Params<'appendEvents'>, body: Body<'appendEvents'>, options?: Options<'appendEvents'>,
  ): Promise<Result<'appendEvents'>> {
    const full = { ...body, events: body.events?.map((e) => (e.id ? e : { ...e, id: uuidv7() })) };
    return this.call('appendEvents', params, full, options);
  }

  /**
   * POST .../sessions/{sid}/messages: Append OpenAI chat messages. Every
   * message without an `id` gets a UUIDv7 before the first attempt (a
   * retry is a replay). `return: 'context'` as appendEvents'.
   */
  appendMessages(
    params: Params<'appendMessages'> & { return: 'context'; format: 'openai' }, body: Body<'appendMessages'>,
    options?: Options<'appendMessages'>,
  ): Promise<WithContext<Schemas['AppendResult'], Schemas['OpenAIContext']>>;
  appendMessages(
    params: Params<'appendMessages'> & { return: 'context'; format?: undefined }, body: Body<'appendMessages'>,
    options?: Options<'appendMessages'>,
  ): Promise<WithContext<Schemas['AppendResult'], Schemas['Context']>>;
  appendMessages(
    params: Params<'appendMessages'> & { return?: undefined }, body: Body<'appendMessages'>,
    options?: Options<'appendMessages'>,
  ): Promise<WithoutContext<Schemas['AppendResult']>>;
  appendMessages(
    params: Params<'appendMessages'>, body: Body<'appendMessages'>, options?: Options<'appendMessages'>,
  ): Promise<Result<'appendMessages'>>;
  appendMessages(
    params: Params<'appendMessages'>, body: Body<'appendMessages'>, options?: Options<'appendMessages'>,
  ): Promise<Result<'appendMessages'>> {
    const full = {
      ...body,
      messages: body.messages.map((m) => ((m as { id?: unknown }).id ? m : { ...m, id: uuidv7() })),
    };
    return this.call('appendMessages', params, full, options);
  }

  /**
   * POST .../memories: Create a long-term memory. A missing `id` is filled
   * with a UUIDv7 before the first attempt: memd answers a repeat with the
   * same content with the stored memory (200).
   */
  createMemory(
    params: Params<'createMemory'>, body: Body<'createMemory'>, options?: Options<'createMemory'>,
  ): Promise<Result<'createMemory'>> {
    return this.call('createMemory', params, { ...body, id: body.id ?? uuidv7() }, options);
  }

  /**
   * PUT .../artifacts/{name}: Store data as the artifact's next version
   * (with contentType as its media type). Not repeated after a lost answer
   * (a repeat would store another version).
   */
  async putArtifact(
    params: Params<'putArtifact'>, data: ArtifactInput, options?: PutArtifactOptions,
  ): Promise<Result<'putArtifact'>> {
    let bytes: Uint8Array | Blob;
    let type = options?.contentType;
    if (typeof data === 'string') {
      bytes = new TextEncoder().encode(data);
      type ??= 'text/plain; charset=utf-8';
    } else if (data instanceof Uint8Array) {
      bytes = data;
    } else if (data instanceof ArrayBuffer) {
      bytes = new Uint8Array(data);
    } else if (typeof Blob !== 'undefined' && data instanceof Blob) {
      bytes = data;
      type ??= data.type || undefined;
    } else {
      throw new TypeError('putArtifact: data must be a Uint8Array, ArrayBuffer, Blob or string');
    }
    const res = await this.#send('putArtifact', params, bytes, type ?? 'application/octet-stream', options);
    if (res.status >= 300) throw answerError(res);
    return decode(res) as Result<'putArtifact'>;
  }

  /**
   * GET .../artifacts/{name}: The bytes of the latest version, or of
   * `version`, with its media type, version and creation time. A missing
   * artifact or version rejects with MemdError code `not_found`.
   */
  async getArtifact(params: Params<'getArtifact'>, options?: Options<'getArtifact'>): Promise<ArtifactData> {
    const res = await this.#send('getArtifact', params, undefined, undefined, {
      ...options, headers: { Accept: '*/*', ...options?.headers },
    });
    if (res.status >= 300) throw answerError(res);
    return {
      data: res.bytes,
      contentType: res.headers.get('content-type') ?? 'application/octet-stream',
      version: Number(res.headers.get('x-memd-artifact-version')),
      created: res.headers.get('x-memd-artifact-created') ?? '',
    };
  }

  /** GET /metrics: Prometheus metrics (text format 0.0.4), as text. */
  async metrics(params: Params<'metrics'> = {}, options?: Options<'metrics'>): Promise<string> {
    const res = await this.#send('metrics', params, undefined, undefined, {
      ...options, headers: { Accept: 'text/plain', ...options?.headers },
    });
    if (res.status >= 300) throw answerError(res);
    return UTF8.decode(res.bytes);
  }

  // ---- Pages: every item, following cursors ---------------------------------

  /** Every session of a user (listSessions' filters apply), following next_cursor. */
  sessions(params: Omit<Params<'listSessions'>, 'cursor'>, options?: CallOptions): AsyncIterable<Schemas['Session']> {
    return pages(params, (p) => this.listSessions(p, options), (page) => ({ items: page.sessions, next: page.next_cursor }), 'cursor');
  }

  /** Every event of a session in seq order (listEvents' filters apply), following next_after_seq. */
  events(params: Params<'listEvents'>, options?: CallOptions): AsyncIterable<Schemas['Event']> {
    return pages(params, (p) => this.listEvents(p, options), (page) => ({ items: page.events, next: page.next_after_seq }), 'after_seq');
  }

  /** Every lane of a user (listLanes' filters apply), following next_cursor. */
  lanes(params: Omit<Params<'listLanes'>, 'cursor'>, options?: CallOptions): AsyncIterable<Schemas['Lane']> {
    return pages(params, (p) => this.listLanes(p, options), (page) => ({ items: page.lanes, next: page.next_cursor }), 'cursor');
  }

  /** Every lane of an app (listAppLanes' filters apply), following next_cursor. */
  appLanes(params: Omit<Params<'listAppLanes'>, 'cursor'>, options?: CallOptions): AsyncIterable<Schemas['Lane']> {
    return pages(params, (p) => this.listAppLanes(p, options), (page) => ({ items: page.lanes, next: page.next_cursor }), 'cursor');
  }

  /** Every memory of a user (listMemories' filters apply), following next_cursor. */
  memories(params: Omit<Params<'listMemories'>, 'cursor'>, options?: CallOptions): AsyncIterable<Schemas['Memory']> {
    return pages(params, (p) => this.listMemories(p, options), (page) => ({ items: page.memories, next: page.next_cursor }), 'cursor');
  }

  /** Every A2A task of an app (listTasks' filters apply), following next_cursor. */
  tasks(params: Omit<Params<'listTasks'>, 'cursor'>, options?: CallOptions): AsyncIterable<Schemas['TaskRecord']> {
    return pages(params, (p) => this.listTasks(p, options), (page) => ({ items: page.tasks, next: page.next_cursor }), 'cursor');
  }

  /** Every checkpoint of a user (listCheckpoints' filters apply), following next_cursor. */
  checkpoints(
    params: Omit<Params<'listCheckpoints'>, 'cursor'>, options?: CallOptions,
  ): AsyncIterable<Schemas['CheckpointSummary'] | Schemas['CheckpointTuple']> {
    return pages(params, (p) => this.listCheckpoints(p, options), (page) => ({ items: page.checkpoints, next: page.next_cursor }), 'cursor');
  }

  /** Every run of an app to resume (listResumableRuns' filter applies), following next_cursor. */
  resumableRuns(params: Omit<Params<'listResumableRuns'>, 'cursor'>, options?: CallOptions): AsyncIterable<Schemas['ResumableRun']> {
    return pages(params, (p) => this.listResumableRuns(p, options), (page) => ({ items: page.sessions, next: page.next_cursor }), 'cursor');
  }

  // ---- One method per operation ----------------------------------------------

  /** GET /healthz: Liveness - the process is up and serving. */
  healthz(params: Params<'healthz'> = {}, options?: Options<'healthz'>): Promise<Result<'healthz'>> {
    return this.call('healthz', params, undefined, options);
  }

  /** GET /readyz: Readiness - every configured store answers and takes writes. */
  readyz(params: Params<'readyz'> = {}, options?: Options<'readyz'>): Promise<Result<'readyz'>> {
    return this.call('readyz', params, undefined, options);
  }

  /** GET /openapi.json: This document, as JSON. */
  openapi(params: Params<'openapi'> = {}, options?: Options<'openapi'>): Promise<Result<'openapi'>> {
    return this.call('openapi', params, undefined, options);
  }

  /** GET /v1/plugins: The loaded plugins, their versions, ABI and instances. */
  listPlugins(params: Params<'listPlugins'> = {}, options?: Options<'listPlugins'>): Promise<Result<'listPlugins'>> {
    return this.call('listPlugins', params, undefined, options);
  }

  /** DELETE /v1/apps/{app}/users/{user}: Forget everything of a user in an app. */
  deleteUser(params: Params<'deleteUser'>, options?: Options<'deleteUser'>): Promise<Result<'deleteUser'>> {
    return this.call('deleteUser', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions: List sessions, newest first, a page at a time. */
  listSessions(params: Params<'listSessions'>, options?: Options<'listSessions'>): Promise<Result<'listSessions'>> {
    return this.call('listSessions', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}: A session, optionally with its events. */
  getSession(params: Params<'getSession'>, options?: Options<'getSession'>): Promise<Result<'getSession'>> {
    return this.call('getSession', params, undefined, options);
  }

  /** PATCH /v1/apps/{app}/users/{user}/sessions/{sid}: Change a session's title, metadata or archived flag. */
  patchSession(params: Params<'patchSession'>, body?: Body<'patchSession'>, options?: Options<'patchSession'>): Promise<Result<'patchSession'>> {
    return this.call('patchSession', params, body, options);
  }

  /** DELETE /v1/apps/{app}/users/{user}/sessions/{sid}: Delete a session with its events, state, artifacts and temp state. */
  deleteSession(params: Params<'deleteSession'>, options?: Options<'deleteSession'>): Promise<Result<'deleteSession'>> {
    return this.call('deleteSession', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/events: Events in seq order, a page at a time. */
  listEvents(params: Params<'listEvents'>, options?: Options<'listEvents'>): Promise<Result<'listEvents'>> {
    return this.call('listEvents', params, undefined, options);
  }

  /** DELETE /v1/apps/{app}/users/{user}/sessions/{sid}/events: Hide every event (a chat UI's clear), keeping the session, its state and artifacts. */
  clearEvents(params: Params<'clearEvents'>, options?: Options<'clearEvents'>): Promise<Result<'clearEvents'>> {
    return this.call('clearEvents', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/context: The working memory the app's strategy selects for the next LLM call. */
  getContext(params: Params<'getContext'> & { format: 'openai' }, options?: Options<'getContext'>): Promise<Schemas['OpenAIContext']>;
  getContext(params: Params<'getContext'> & { format?: undefined }, options?: Options<'getContext'>): Promise<Schemas['Context']>;
  getContext(params: Params<'getContext'>, options?: Options<'getContext'>): Promise<Result<'getContext'>>;
  getContext(params: Params<'getContext'>, options?: Options<'getContext'>): Promise<Result<'getContext'>> {
    return this.call('getContext', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/state: The merged state of a session. */
  getState(params: Params<'getState'>, options?: Options<'getState'>): Promise<Result<'getState'>> {
    return this.call('getState', params, undefined, options);
  }

  /** PATCH /v1/apps/{app}/users/{user}/sessions/{sid}/state: Apply a state delta (null deletes a key) atomically. */
  patchState(params: Params<'patchState'>, body: Body<'patchState'>, options?: Options<'patchState'>): Promise<Result<'patchState'>> {
    return this.call('patchState', params, body, options);
  }

  /** POST /v1/apps/{app}/users/{user}/sessions/{sid}:rewind: Back up n user turns (a chat UI's undo or retry). */
  rewindSession(params: Params<'rewindSession'>, body: Body<'rewindSession'>, options?: Options<'rewindSession'>): Promise<Result<'rewindSession'>> {
    return this.call('rewindSession', params, body, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/messages: The visible transcript as OpenAI chat-completions messages. */
  getMessages(params: Params<'getMessages'>, options?: Options<'getMessages'>): Promise<Result<'getMessages'>> {
    return this.call('getMessages', params, undefined, options);
  }

  /** PUT /v1/apps/{app}/users/{user}/sessions/{sid}/messages: Replace the whole transcript atomically (a chat UI's retry, edit or compress). */
  replaceMessages(params: Params<'replaceMessages'>, body: Body<'replaceMessages'>, options?: Options<'replaceMessages'>): Promise<Result<'replaceMessages'>> {
    return this.call('replaceMessages', params, body, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/operations: The session's rewinds, rewrites, clears and undos, newest first. */
  listOperations(params: Params<'listOperations'>, options?: Options<'listOperations'>): Promise<Result<'listOperations'>> {
    return this.call('listOperations', params, undefined, options);
  }

  /** POST /v1/apps/{app}/users/{user}/sessions/{sid}/operations/{op}:undo: Reverse a rewind, rewrite or clear. */
  undoOperation(params: Params<'undoOperation'>, body?: Body<'undoOperation'>, options?: Options<'undoOperation'>): Promise<Result<'undoOperation'>> {
    return this.call('undoOperation', params, body, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/state/history: The session's state changes, oldest first, a page at a time. */
  getStateHistory(params: Params<'getStateHistory'>, options?: Options<'getStateHistory'>): Promise<Result<'getStateHistory'>> {
    return this.call('getStateHistory', params, undefined, options);
  }

  /** POST /v1/apps/{app}/users/{user}/sessions/{sid}/invocations/{invocation}:end: End an invocation - drop the temp state written under it. */
  endInvocation(params: Params<'endInvocation'>, options?: Options<'endInvocation'>): Promise<Result<'endInvocation'>> {
    return this.call('endInvocation', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/artifacts: The latest version of every artifact of a session. */
  listArtifacts(params: Params<'listArtifacts'>, options?: Options<'listArtifacts'>): Promise<Result<'listArtifacts'>> {
    return this.call('listArtifacts', params, undefined, options);
  }

  /** DELETE /v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}: Delete every version of the artifact. */
  deleteArtifact(params: Params<'deleteArtifact'>, options?: Options<'deleteArtifact'>): Promise<Result<'deleteArtifact'>> {
    return this.call('deleteArtifact', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}/versions: Every version of an artifact, ascending. */
  listArtifactVersions(params: Params<'listArtifactVersions'>, options?: Options<'listArtifactVersions'>): Promise<Result<'listArtifactVersions'>> {
    return this.call('listArtifactVersions', params, undefined, options);
  }

  /** POST /v1/apps/{app}/users/{user}/search: Search the user's events and long-term memories by keyword (BM25F), vector similarity or both. */
  search(params: Params<'search'>, body: Body<'search'>, options?: Options<'search'>): Promise<Result<'search'>> {
    return this.call('search', params, body, options);
  }

  /** POST /v1/apps/{app}/users/{user}/index:rebuild: Start rebuilding the user's search index entries from their sessions, as a background job. */
  rebuildIndex(params: Params<'rebuildIndex'>, options?: Options<'rebuildIndex'>): Promise<Result<'rebuildIndex'>> {
    return this.call('rebuildIndex', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/memories: List the user's memories, newest created first, a page at a time. */
  listMemories(params: Params<'listMemories'>, options?: Options<'listMemories'>): Promise<Result<'listMemories'>> {
    return this.call('listMemories', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/memories/{mid}: One memory (404 once it has expired or was deleted). */
  getMemory(params: Params<'getMemory'>, options?: Options<'getMemory'>): Promise<Result<'getMemory'>> {
    return this.call('getMemory', params, undefined, options);
  }

  /** PATCH /v1/apps/{app}/users/{user}/memories/{mid}: Change a memory's text, kind, topics, entities or expiry. */
  updateMemory(params: Params<'updateMemory'>, body: Body<'updateMemory'>, options?: Options<'updateMemory'>): Promise<Result<'updateMemory'>> {
    return this.call('updateMemory', params, body, options);
  }

  /** DELETE /v1/apps/{app}/users/{user}/memories/{mid}: Delete a memory (its history stays readable). */
  deleteMemory(params: Params<'deleteMemory'>, options?: Options<'deleteMemory'>): Promise<Result<'deleteMemory'>> {
    return this.call('deleteMemory', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/memories/{mid}/history: Every change of a memory, oldest first (also after it was deleted). */
  getMemoryHistory(params: Params<'getMemoryHistory'>, options?: Options<'getMemoryHistory'>): Promise<Result<'getMemoryHistory'>> {
    return this.call('getMemoryHistory', params, undefined, options);
  }

  /** GET /v1/apps/{app}/tasks: List the app's A2A tasks, most recently saved first, a page at a time. */
  listTasks(params: Params<'listTasks'>, options?: Options<'listTasks'>): Promise<Result<'listTasks'>> {
    return this.call('listTasks', params, undefined, options);
  }

  /** GET /v1/apps/{app}/tasks/{tid}: One A2A task (`history_length`: only its most recent history messages). */
  getTask(params: Params<'getTask'>, options?: Options<'getTask'>): Promise<Result<'getTask'>> {
    return this.call('getTask', params, undefined, options);
  }

  /**
   * PUT /v1/apps/{app}/tasks/{tid}: Save an A2A task (create it or replace
   * it whole). `ifMatch` saves only over that version, `ifNoneMatch: '*'`
   * only creates; a 409 answers another version, an existing task or a
   * terminal state left. An unconditional save is retried after a lost
   * answer (it saves the same task again).
   */
  putTask(params: Params<'putTask'>, body: Body<'putTask'>, options?: Options<'putTask'>): Promise<Result<'putTask'>> {
    return this.call('putTask', params, body, options);
  }

  /** DELETE /v1/apps/{app}/tasks/{tid}: Delete an A2A task (`ifMatch`: only that version). */
  deleteTask(params: Params<'deleteTask'>, options?: Options<'deleteTask'>): Promise<Result<'deleteTask'>> {
    return this.call('deleteTask', params, undefined, options);
  }

  /** GET /v1/apps/{app}/jobs: The app's background jobs, newest first. */
  listJobs(params: Params<'listJobs'>, options?: Options<'listJobs'>): Promise<Result<'listJobs'>> {
    return this.call('listJobs', params, undefined, options);
  }

  /** GET /v1/apps/{app}/jobs/{job}: One background job of the app - state, progress, error. */
  getJob(params: Params<'getJob'>, options?: Options<'getJob'>): Promise<Result<'getJob'>> {
    return this.call('getJob', params, undefined, options);
  }

  /** DELETE /v1/apps/{app}/jobs/{job}: Cancel a background job of the app. */
  cancelJob(params: Params<'cancelJob'>, options?: Options<'cancelJob'>): Promise<Result<'cancelJob'>> {
    return this.call('cancelJob', params, undefined, options);
  }

  /** POST /v1/apps/{app}/lanes:resolve: Derive the lane key and user scope of a message source. */
  resolveLane(params: Params<'resolveLane'>, body: Body<'resolveLane'>, options?: Options<'resolveLane'>): Promise<Result<'resolveLane'>> {
    return this.call('resolveLane', params, body, options);
  }

  /** POST /v1/apps/{app}/lanes:open: Resolve a message source and open its lane, in one call. */
  openLaneBySource(params: Params<'openLaneBySource'> & { return: 'context'; format: 'openai' }, body: Body<'openLaneBySource'>, options?: Options<'openLaneBySource'>): Promise<WithContext<Schemas['LaneOpenedBySource'], Schemas['OpenAIContext']>>;
  openLaneBySource(params: Params<'openLaneBySource'> & { return: 'context'; format?: undefined }, body: Body<'openLaneBySource'>, options?: Options<'openLaneBySource'>): Promise<WithContext<Schemas['LaneOpenedBySource'], Schemas['Context']>>;
  openLaneBySource(params: Params<'openLaneBySource'> & { return?: undefined }, body: Body<'openLaneBySource'>, options?: Options<'openLaneBySource'>): Promise<WithoutContext<Schemas['LaneOpenedBySource']>>;
  openLaneBySource(params: Params<'openLaneBySource'>, body: Body<'openLaneBySource'>, options?: Options<'openLaneBySource'>): Promise<Result<'openLaneBySource'>>;
  openLaneBySource(params: Params<'openLaneBySource'>, body: Body<'openLaneBySource'>, options?: Options<'openLaneBySource'>): Promise<Result<'openLaneBySource'>> {
    return this.call('openLaneBySource', params, body, options);
  }

  /** GET /v1/apps/{app}/lanes: The app's lanes of every user, newest activity first. */
  listAppLanes(params: Params<'listAppLanes'>, options?: Options<'listAppLanes'>): Promise<Result<'listAppLanes'>> {
    return this.call('listAppLanes', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/lanes: A user's lanes, newest activity first. */
  listLanes(params: Params<'listLanes'>, options?: Options<'listLanes'>): Promise<Result<'listLanes'>> {
    return this.call('listLanes', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/lanes/{key}: A lane - its session, turn, inbox depth, recovery state and usage. */
  getLane(params: Params<'getLane'>, options?: Options<'getLane'>): Promise<Result<'getLane'>> {
    return this.call('getLane', params, undefined, options);
  }

  /** DELETE /v1/apps/{app}/users/{user}/lanes/{key}: Forget a lane and its inbox (its sessions stay). */
  deleteLane(params: Params<'deleteLane'>, options?: Options<'deleteLane'>): Promise<Result<'deleteLane'>> {
    return this.call('deleteLane', params, undefined, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}:open: Get-or-create - the lane and its current session. */
  openLane(params: Params<'openLane'> & { return: 'context'; format: 'openai' }, body?: Body<'openLane'>, options?: Options<'openLane'>): Promise<WithContext<Schemas['LaneOpened'], Schemas['OpenAIContext']>>;
  openLane(params: Params<'openLane'> & { return: 'context'; format?: undefined }, body?: Body<'openLane'>, options?: Options<'openLane'>): Promise<WithContext<Schemas['LaneOpened'], Schemas['Context']>>;
  openLane(params: Params<'openLane'> & { return?: undefined }, body?: Body<'openLane'>, options?: Options<'openLane'>): Promise<WithoutContext<Schemas['LaneOpened']>>;
  openLane(params: Params<'openLane'>, body?: Body<'openLane'>, options?: Options<'openLane'>): Promise<Result<'openLane'>>;
  openLane(params: Params<'openLane'>, body?: Body<'openLane'>, options?: Options<'openLane'>): Promise<Result<'openLane'>> {
    return this.call('openLane', params, body, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}:reset: Start the lane afresh (a user's /new). */
  resetLane(params: Params<'resetLane'>, body?: Body<'resetLane'>, options?: Options<'resetLane'>): Promise<Result<'resetLane'>> {
    return this.call('resetLane', params, body, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}:switch: Point the lane at another session of the same user (a user's /resume). */
  switchLane(params: Params<'switchLane'>, body: Body<'switchLane'>, options?: Options<'switchLane'>): Promise<Result<'switchLane'>> {
    return this.call('switchLane', params, body, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}:suspend: Suspend the lane (a user's /stop). */
  suspendLane(params: Params<'suspendLane'>, options?: Options<'suspendLane'>): Promise<Result<'suspendLane'>> {
    return this.call('suspendLane', params, undefined, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}/turns: Begin a turn - one at a time per lane, under a lease. */
  beginTurn(params: Params<'beginTurn'>, body?: Body<'beginTurn'>, options?: Options<'beginTurn'>): Promise<Result<'beginTurn'>> {
    return this.call('beginTurn', params, body, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}/turns/{turn}:heartbeat: Extend a turn's lease. */
  heartbeatTurn(params: Params<'heartbeatTurn'>, body?: Body<'heartbeatTurn'>, options?: Options<'heartbeatTurn'>): Promise<Result<'heartbeatTurn'>> {
    return this.call('heartbeatTurn', params, body, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}/turns/{turn}:end: End a turn with its outcome and usage. */
  endTurn(params: Params<'endTurn'>, body: Body<'endTurn'>, options?: Options<'endTurn'>): Promise<Result<'endTurn'>> {
    return this.call('endTurn', params, body, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}/inbox: Keep a message that arrived during a turn, durably. */
  putInbox(params: Params<'putInbox'>, body: Body<'putInbox'>, options?: Options<'putInbox'>): Promise<Result<'putInbox'>> {
    return this.call('putInbox', params, body, options);
  }

  /** GET /v1/apps/{app}/users/{user}/lanes/{key}/inbox: The lane's inbox - the slot first, then the FIFO in order. */
  listInbox(params: Params<'listInbox'>, options?: Options<'listInbox'>): Promise<Result<'listInbox'>> {
    return this.call('listInbox', params, undefined, options);
  }

  /** POST /v1/apps/{app}/users/{user}/lanes/{key}/inbox:take: The turn holder takes the next inbox item. */
  takeInbox(params: Params<'takeInbox'>, body: Body<'takeInbox'>, options?: Options<'takeInbox'>): Promise<Result<'takeInbox'>> {
    return this.call('takeInbox', params, body, options);
  }

  /** POST /v1/lanes:sweep: Run one pass of the lane watcher now. */
  sweepLanes(params: Params<'sweepLanes'> = {}, options?: Options<'sweepLanes'>): Promise<Result<'sweepLanes'>> {
    return this.call('sweepLanes', params, undefined, options);
  }

  /** POST /v1/apps/{app}/users/{user}/sessions/{sid}/memories:extract: Extract long-term memories from the session's unread events now. */
  extractMemories(params: Params<'extractMemories'>, options?: Options<'extractMemories'>): Promise<Result<'extractMemories'>> {
    return this.call('extractMemories', params, undefined, options);
  }

  /** POST /v1/memories:sweep: Run one pass of the memory worker now. */
  sweepMemories(params: Params<'sweepMemories'> = {}, options?: Options<'sweepMemories'>): Promise<Result<'sweepMemories'>> {
    return this.call('sweepMemories', params, undefined, options);
  }

  /** PUT /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}: Store a checkpoint of a run (the session is its thread). */
  putCheckpoint(params: Params<'putCheckpoint'>, body: Body<'putCheckpoint'>, options?: Options<'putCheckpoint'>): Promise<Result<'putCheckpoint'>> {
    return this.call('putCheckpoint', params, body, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}: One checkpoint with its payload and pending writes. */
  getCheckpoint(params: Params<'getCheckpoint'>, options?: Options<'getCheckpoint'>): Promise<Result<'getCheckpoint'>> {
    return this.call('getCheckpoint', params, undefined, options);
  }

  /** POST /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}/writes: Add pending writes of a task to a checkpoint, all or none. */
  putCheckpointWrites(
    params: Params<'putCheckpointWrites'>, body: Body<'putCheckpointWrites'>, options?: Options<'putCheckpointWrites'>,
  ): Promise<Result<'putCheckpointWrites'>> {
    return this.call('putCheckpointWrites', params, body, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints:latest: The newest (greatest id) unexpired checkpoint of the session's namespace. */
  getLatestCheckpoint(params: Params<'getLatestCheckpoint'>, options?: Options<'getLatestCheckpoint'>): Promise<Result<'getLatestCheckpoint'>> {
    return this.call('getLatestCheckpoint', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints: The session's checkpoints, newest first, a page at a time. */
  listSessionCheckpoints(
    params: Params<'listSessionCheckpoints'>, options?: Options<'listSessionCheckpoints'>,
  ): Promise<Result<'listSessionCheckpoints'>> {
    return this.call('listSessionCheckpoints', params, undefined, options);
  }

  /** DELETE /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints: Delete the session's checkpoints and their pending writes. */
  deleteCheckpoints(params: Params<'deleteCheckpoints'>, options?: Options<'deleteCheckpoints'>): Promise<Result<'deleteCheckpoints'>> {
    return this.call('deleteCheckpoints', params, undefined, options);
  }

  /** GET /v1/apps/{app}/users/{user}/checkpoints: The user's checkpoints across sessions, newest first, a page at a time. */
  listCheckpoints(params: Params<'listCheckpoints'>, options?: Options<'listCheckpoints'>): Promise<Result<'listCheckpoints'>> {
    return this.call('listCheckpoints', params, undefined, options);
  }

  /** GET /v1/apps/{app}/checkpoints:resumable: The app's runs a restarting runtime should resume. */
  listResumableRuns(params: Params<'listResumableRuns'>, options?: Options<'listResumableRuns'>): Promise<Result<'listResumableRuns'>> {
    return this.call('listResumableRuns', params, undefined, options);
  }

}

type BodyInitish = Uint8Array | Blob | string;

/* A 2xx answer's value: undefined for 204, JSON parsed, text as a string. */
function decode(res: TransportResponse): unknown {
  if (res.status === 204 || res.bytes.length === 0) return undefined;
  const type = res.headers.get('content-type') ?? '';
  const text = UTF8.decode(res.bytes);
  if (!/[/+]json\b/i.test(type)) return text;
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new MemdError({
      status: res.status, code: 'invalid_response', message: `memd answered invalid JSON: ${String(cause)}`,
      retryable: false, requestId: res.requestId, cause,
    });
  }
}

/* Compile-time coverage: MemdClient has a method for every operation. */
type Missing = Exclude<ClientOperation, keyof MemdClient>;
const coverage: [Missing] extends [never] ? true : Missing = true;
void coverage;

