// SPDX-License-Identifier: MIT
// The client's types, derived from the types `npm run generate` writes from
// api/openapi.yaml: each operation's parameters, request body and answer
// come from the spec, never restated by hand.

import type { components, operations, paths } from './generated/openapi.js';

export type { components, operations, paths };

/** memd's schemas by name: `Schemas['Session']`, `Schemas['Event']`, ... */
export type Schemas = components['schemas'];

/** The operations MemdClient has a method for: all but the MCP transport's (MCP clients speak MCP). */
export type ClientOperation = Exclude<keyof operations, 'mcpMessage' | 'mcpEndSession'>;

type Defined<T> = Exclude<T, undefined>;
type Simplify<T> = { [K in keyof T]: T[K] } & {};

/* One kind of an operation's parameters ({} when it has none). */
type ParamsIn<O extends keyof operations, Where extends 'path' | 'query' | 'header'> =
  operations[O]['parameters'] extends { [W in Where]?: infer X }
    ? [Defined<X>] extends [never] ? {} : Defined<X>
    : {};

/** An operation's path and query parameters, by their names in the spec. */
export type Params<O extends ClientOperation> = Simplify<ParamsIn<O, 'path'> & ParamsIn<O, 'query'>>;

/** An operation's JSON request body. */
export type Body<O extends ClientOperation> =
  Defined<operations[O]['requestBody']> extends { content: { 'application/json': infer B } } ? B : never;

type SuccessStatus = 200 | 201 | 202 | 204;
type ContentOf<R> = R extends { content: infer C }
  ? C extends { 'application/json': infer J } ? J
  : C extends { 'text/plain': infer T } ? T
  : unknown
  : undefined;

/** What an operation resolves to: its 2xx JSON body (a union when it has several), undefined for 204. */
export type Result<O extends ClientOperation> = {
  [S in keyof operations[O]['responses']]: S extends SuccessStatus ? ContentOf<operations[O]['responses'][S]> : never;
}[keyof operations[O]['responses']];

/** A write's answer without the context (no `return: 'context'`). */
export type WithoutContext<R> = Omit<R, 'context' | 'context_error'>;

/**
 * A write's answer with `return: 'context'`: `context` (of form C) as it
 * is right after the write, or `context_error` (why the read failed) when
 * the write is done but the read is not: the write is durable, do not
 * send it again.
 */
export type WithContext<R, C> = WithoutContext<R> &
  ({ context: C; context_error?: undefined } | { context?: undefined; context_error: Schemas['ErrorDetail'] });

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call (and its retries): MemdError code `aborted`. */
  signal?: AbortSignal;
  /** Per attempt, overriding the client's timeoutMs. */
  timeoutMs?: number;
  /** Extra request headers. */
  headers?: Record<string, string>;
}

/**
 * Options of a call; `ifMatch` where the operation takes If-Match (a
 * memory's or a task's version, the ETag), `ifNoneMatch: '*'` where it
 * takes If-None-Match (create only).
 */
export type Options<O extends ClientOperation> = CallOptions &
  ('If-Match' extends keyof ParamsIn<O, 'header'> ? { ifMatch?: string | number } : {}) &
  ('If-None-Match' extends keyof ParamsIn<O, 'header'> ? { ifNoneMatch?: '*' } : {});

/** An HTTP method as the generated `paths` spell them. */
type Method = 'get' | 'put' | 'post' | 'delete' | 'patch';

/**
 * The [method, path] pairs of `paths` whose operation is O: a route table
 * entry that names another operation's route, or a route the spec lacks,
 * does not compile.
 */
export type RouteOf<O extends ClientOperation> = {
  [P in keyof paths]: {
    [M in keyof paths[P] & Method]: [paths[P][M]] extends [operations[O]]
      ? [operations[O]] extends [paths[P][M]] ? readonly [M, P] : never
      : never;
  }[keyof paths[P] & Method];
}[keyof paths];
