// SPDX-License-Identifier: MIT
// @memd/client/adk: memd as Google ADK's session, memory and artifact
// services (package @google/adk 2.0).

export { MemdSessionService } from './session_service.js';
export type { MemdSessionServiceOptions, OnStale } from './session_service.js';
export { MemdArtifactService, USER_ARTIFACTS_SESSION, ENVELOPE_MEDIA_TYPE, TEXT_MEDIA_TYPE } from './artifact_service.js';
export type { MemdArtifactServiceOptions } from './artifact_service.js';
export { MemdMemoryService } from './memory_service.js';
export type { MemdMemoryServiceOptions } from './memory_service.js';
export { toMemdEvent, toAdkEvent, memdRole, ADK_METADATA_KEY } from './events.js';
export type { MemdEventInput, MemdEventRecord } from './events.js';
export type { MemdConnection } from './common.js';
