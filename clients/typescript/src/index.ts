// SPDX-License-Identifier: MIT
// @memd/client: a typed client of memd's REST API.

export {
  MemdClient, OPERATIONS, DEFAULT_MAX_CONNECTIONS, DEFAULT_RETRIES, DEFAULT_RETRY_BASE_MS, DEFAULT_RETRY_MAX_MS,
  DEFAULT_TIMEOUT_MS,
  type ArtifactData, type ArtifactInput, type MemdClientOptions, type PutArtifactOptions,
} from './client.js';
export { MemdError, RETRY_AFTER_MAX_MS, type ClientErrorCode } from './transport.js';
export { uuidv7 } from './ids.js';
export type { Page } from './pages.js';
export type {
  Body, CallOptions, ClientOperation, Options, Params, Result, Schemas, WithContext, WithoutContext, components,
  operations, paths,
} from './types.js';
