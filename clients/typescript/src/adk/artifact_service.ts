// SPDX-License-Identifier: MIT
// MemdArtifactService: ADK's artifact service on memd's session
// artifacts. ADK's versions count from 0, memd's from 1: ADK version =
// memd version - 1. A part is stored as its bytes when memd's media type
// can say what it is (text, inline data with a media type); anything
// else (file data, custom metadata, a part with more fields) as a JSON
// envelope of media type ENVELOPE_MEDIA_TYPE. "user:" filenames are the
// user's, across sessions, as in ADK: memd keeps them in one reserved
// session per user, USER_ARTIFACTS_SESSION.

import type {
  BaseArtifactService,
  DeleteArtifactRequest,
  ListArtifactKeysRequest,
  ListVersionsRequest,
  LoadArtifactRequest,
  SaveArtifactRequest,
} from '@google/adk';
import type { Part } from '@google/genai';
import type { MemdClient, Params, Schemas } from '../index.js';
import { clientOf, isStatus, orNotFound, type MemdConnection } from './common.js';

/** The memd session that holds a user's "user:" artifacts. */
export const USER_ARTIFACTS_SESSION = 'adk:user-artifacts';
/** The media type of a part stored whole, as JSON: {part, customMetadata?}. */
export const ENVELOPE_MEDIA_TYPE = 'application/vnd.memd.adk-part+json';
/** The media type of a text part's UTF-8 bytes. */
export const TEXT_MEDIA_TYPE = 'text/plain; charset=utf-8';
/** ADK's prefix of user-scoped filenames. */
const USER_PREFIX = 'user:';
/** Bytes converted to base64 at a time (a multiple of 3: no padding between). */
const BASE64_CHUNK = 3 * 8192;

export type MemdArtifactServiceOptions = MemdConnection;

/** ADK's metadata of one artifact version (not exported by name). */
type ArtifactVersion = NonNullable<Awaited<ReturnType<BaseArtifactService['getArtifactVersion']>>>;

/** memd's Artifact object. */
type MemdArtifact = Schemas['Artifact'];

/** What an envelope holds. */
interface Envelope {
  part: Part;
  customMetadata?: Record<string, unknown>;
}

function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += BASE64_CHUNK) {
    s += btoa(String.fromCharCode(...bytes.subarray(i, i + BASE64_CHUNK)));
  }
  return s;
}

function fromBase64(b64: string): Uint8Array {
  // genai allows base64url too.
  const bin = atob(b64.replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The bytes and media type a part is stored as. */
function encodePart(part: Part, customMetadata?: Record<string, unknown>): { data: Uint8Array | string; contentType: string } {
  const keys = Object.keys(part).filter((k) => (part as Record<string, unknown>)[k] !== undefined);
  if (!customMetadata && keys.length === 1) {
    if (keys[0] === 'text' && typeof part.text === 'string')
      return { data: part.text, contentType: TEXT_MEDIA_TYPE };
    const inline = part.inlineData;
    if (
      keys[0] === 'inlineData' &&
      inline &&
      typeof inline.data === 'string' &&
      typeof inline.mimeType === 'string' &&
      inline.mimeType !== '' &&
      inline.mimeType !== TEXT_MEDIA_TYPE &&
      inline.mimeType !== ENVELOPE_MEDIA_TYPE &&
      Object.keys(inline).every((k) => k === 'data' || k === 'mimeType')
    )
      return { data: fromBase64(inline.data), contentType: inline.mimeType };
  }
  const env: Envelope = customMetadata ? { part, customMetadata } : { part };
  return { data: JSON.stringify(env), contentType: ENVELOPE_MEDIA_TYPE };
}

/** The part (and custom metadata) stored bytes read back as. */
function decodePart(data: Uint8Array, contentType: string): Envelope {
  if (contentType === ENVELOPE_MEDIA_TYPE) return JSON.parse(new TextDecoder().decode(data)) as Envelope;
  if (contentType === TEXT_MEDIA_TYPE) return { part: { text: new TextDecoder().decode(data) } };
  return { part: { inlineData: { data: toBase64(data), mimeType: contentType } } };
}

export class MemdArtifactService implements BaseArtifactService {
  readonly memd: MemdClient;

  constructor(options: MemdArtifactServiceOptions) {
    this.memd = clientOf(options);
  }

  /** memd's path parameters of an artifact: "user:" names in the user's
   * reserved session. */
  private where(appName: string, userId: string, sessionId: string, filename: string) {
    const sid = filename.startsWith(USER_PREFIX) ? USER_ARTIFACTS_SESSION : sessionId;
    return { app: appName, user: userId, sid, name: filename };
  }

  async saveArtifact({ appName, userId, sessionId, filename, artifact, customMetadata }: SaveArtifactRequest): Promise<number> {
    if (!artifact.inlineData && artifact.text === undefined && !artifact.fileData)
      throw new Error('Artifact must have either inlineData or text content.');
    const where = this.where(appName, userId, sessionId, filename);
    const { data, contentType } = encodePart(artifact, customMetadata);
    let stored: MemdArtifact;
    try {
      stored = await this.memd.putArtifact(where, data, { contentType });
    } catch (err) {
      // The user's reserved session is made by its first artifact.
      if (!isStatus(err, 404) || where.sid !== USER_ARTIFACTS_SESSION) throw err;
      try {
        await this.memd.createSession({ app: appName, user: userId }, { id: USER_ARTIFACTS_SESSION });
      } catch (e) {
        if (!isStatus(e, 409)) throw e;
      }
      stored = await this.memd.putArtifact(where, data, { contentType });
    }
    return stored.version - 1;
  }

  /** The stored part of a version (ADK's, 0-based; undefined = the latest). */
  private async read(req: LoadArtifactRequest): Promise<Envelope | undefined> {
    if (req.version !== undefined && (!Number.isInteger(req.version) || req.version < 0)) return undefined;
    const where: Params<'getArtifact'> = this.where(req.appName, req.userId, req.sessionId, req.filename);
    if (req.version !== undefined) where.version = req.version + 1;
    const got = await orNotFound(this.memd.getArtifact(where));
    return got ? decodePart(got.data, got.contentType) : undefined;
  }

  async loadArtifact(req: LoadArtifactRequest): Promise<Part | undefined> {
    return (await this.read(req))?.part;
  }

  async listArtifactKeys({ appName, userId, sessionId }: ListArtifactKeysRequest): Promise<string[]> {
    const names: string[] = [];
    for (const sid of [sessionId, USER_ARTIFACTS_SESSION]) {
      const list = await orNotFound(this.memd.listArtifacts({ app: appName, user: userId, sid }));
      for (const a of list?.artifacts ?? []) {
        // A session's own "user:" names are not reachable through ADK.
        if ((sid === USER_ARTIFACTS_SESSION) === a.name.startsWith(USER_PREFIX)) names.push(a.name);
      }
    }
    return names.sort();
  }

  async deleteArtifact({ appName, userId, sessionId, filename }: DeleteArtifactRequest): Promise<void> {
    await orNotFound(this.memd.deleteArtifact(this.where(appName, userId, sessionId, filename)));
  }

  /** memd's versions of an artifact, ascending ([] when none). */
  private async memdVersions(req: ListVersionsRequest): Promise<MemdArtifact[]> {
    const got = await orNotFound(
      this.memd.listArtifactVersions(this.where(req.appName, req.userId, req.sessionId, req.filename)),
    );
    return got?.versions ?? [];
  }

  async listVersions(req: ListVersionsRequest): Promise<number[]> {
    return (await this.memdVersions(req)).map((v) => v.version - 1);
  }

  /** ADK's metadata of one version: its custom metadata, and the media
   * type of file data (as ADK's in-memory service gives them). */
  private async metadata(req: ListVersionsRequest, v: MemdArtifact): Promise<ArtifactVersion> {
    const meta: ArtifactVersion = { version: v.version - 1 };
    if (v.mime_type === ENVELOPE_MEDIA_TYPE) {
      const env = await this.read({ ...req, version: v.version - 1 });
      if (env?.customMetadata) meta.customMetadata = env.customMetadata;
      if (env?.part.fileData && !env.part.inlineData && env.part.text === undefined)
        meta.mimeType = env.part.fileData.mimeType;
    }
    return meta;
  }

  async listArtifactVersions(req: ListVersionsRequest): Promise<ArtifactVersion[]> {
    const out: ArtifactVersion[] = [];
    for (const v of await this.memdVersions(req)) out.push(await this.metadata(req, v));
    return out;
  }

  async getArtifactVersion(req: LoadArtifactRequest): Promise<ArtifactVersion | undefined> {
    const versions = await this.memdVersions(req);
    const v =
      req.version === undefined ? versions[versions.length - 1] : versions.find((x) => x.version === req.version! + 1);
    return v ? this.metadata(req, v) : undefined;
  }
}
