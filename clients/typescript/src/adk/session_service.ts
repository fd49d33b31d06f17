// SPDX-License-Identifier: MIT
// MemdSessionService: ADK's session service on memd. ADK's appName,
// userId and session id are memd's app, user and session id; an ADK event
// is one memd event (./events.ts) and its stateDelta the same append's
// state_delta, so the event and the state change commit together.

import { BaseSessionService, createSession } from '@google/adk';
import type {
  AppendEventRequest,
  CreateSessionRequest,
  DeleteSessionRequest,
  Event,
  GetSessionRequest,
  ListSessionsRequest,
  ListSessionsResponse,
  Session,
} from '@google/adk';
import { uuidv7, type Body, type MemdClient, type Params, type Schemas } from '../index.js';
import { clientOf, isStatus, orNotFound, type MemdConnection } from './common.js';
import { toAdkEvent, toMemdEvent } from './events.js';
import { USER_ARTIFACTS_SESSION } from './artifact_service.js';

/** What appendEvent does with a stale session object (memd's session
 * moved on since the object was read: another writer appended). */
export type OnStale = 'error' | 'reload';

export type MemdSessionServiceOptions = MemdConnection & {
  /** 'error' (the default): throw, as ADK's database session service does
   * for a stale session; 'reload': read the session again into the object
   * (events, state) and append, as ADK for TypeScript's
   * DatabaseSessionService does. */
  onStale?: OnStale;
};

/** ADK's state prefix of keys that live for one invocation only. */
const TEMP_PREFIX = 'temp:';
/** How often appendEvent with onStale 'reload' reloads and tries again
 * before it gives up (each time another writer appended meanwhile). */
const RELOAD_ATTEMPTS = 5;

/** memd's Session object. */
type MemdSession = Schemas['Session'];

/** state without its temp: keys, in a null-prototype object (a
 * "__proto__" key stays a key). */
function withoutTemp(state: Record<string, unknown> | undefined | null): Record<string, unknown> {
  const out = Object.create(null) as Record<string, unknown>;
  for (const [k, v] of Object.entries(state ?? {})) {
    if (!k.startsWith(TEMP_PREFIX)) out[k] = v;
  }
  return out;
}

/** What an event's model call used (genai's usageMetadata) as memd's
 * usage, added to the session's sums in the same append; undefined when
 * the event says nothing. */
function memdUsage(event: Event): Record<string, number> | undefined {
  const u = event.usageMetadata;
  if (!u) return undefined;
  const out: Record<string, number> = {};
  const put = (k: string, v: number | undefined) => {
    if (typeof v === 'number' && Number.isInteger(v) && v >= 0) out[k] = v;
  };
  put('input_tokens', u.promptTokenCount);
  put('output_tokens', (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0) || undefined);
  put('cache_read_tokens', u.cachedContentTokenCount);
  put('last_prompt_tokens', u.promptTokenCount);
  return Object.keys(out).length > 0 ? out : undefined;
}

/** err with its cause (memd's answer) attached, as ES2022's Error does. */
function withCause(err: Error, cause: unknown): Error {
  Object.defineProperty(err, 'cause', { value: cause, writable: true, configurable: true });
  return err;
}

export class MemdSessionService extends BaseSessionService {
  readonly memd: MemdClient;
  readonly onStale: OnStale;
  /** The memd version each Session object was read or last written at. */
  private readonly versions = new WeakMap<Session, number>();

  constructor(options: MemdSessionServiceOptions) {
    super();
    this.memd = clientOf(options);
    this.onStale = options.onStale ?? 'error';
    if (this.onStale !== 'error' && this.onStale !== 'reload')
      throw new TypeError(`MemdSessionService: onStale: must be 'error' or 'reload', not '${String(this.onStale)}'`);
  }

  /** The memd version session was read or last written at (undefined for
   * an object this service did not make). */
  versionOf(session: Session): number | undefined {
    return this.versions.get(session);
  }

  async createSession({ appName, userId, state, sessionId }: CreateSessionRequest): Promise<Session> {
    const body: Body<'createSession'> = {};
    if (sessionId) body.id = sessionId;
    const initial = withoutTemp(state);
    if (Object.keys(initial).length > 0) body.state = { ...initial };
    let created: MemdSession;
    try {
      created = await this.memd.createSession({ app: appName, user: userId }, body);
    } catch (err) {
      if (isStatus(err, 409)) throw withCause(new Error(`Session with id ${sessionId} already exists.`), err);
      throw err;
    }
    const merged = await this.readState(appName, userId, created.id);
    const session = createSession({
      id: created.id,
      appName,
      userId,
      state: merged,
      events: [],
      lastUpdateTime: Date.parse(created.updated),
    });
    this.versions.set(session, created.version);
    return session;
  }

  async getSession({ appName, userId, sessionId, config }: GetSessionRequest): Promise<Session | undefined> {
    const query: Params<'getSession'> = { app: appName, user: userId, sid: sessionId, events: 0 };
    if (config?.numRecentEvents) query.events = config.numRecentEvents;
    if (config?.afterTimestamp) query.after_time = new Date(config.afterTimestamp).toISOString();
    let found: MemdSession | undefined;
    try {
      found = await orNotFound(this.memd.getSession(query));
    } catch (err) {
      // Too large to answer whole: the same events, a page at a time.
      if (!isStatus(err, 413)) throw err;
      found = await this.readPaged(appName, userId, sessionId, config?.numRecentEvents, config?.afterTimestamp);
    }
    if (!found) return undefined;
    // The state is read after the session: a state newer than the version
    // makes the next append a 409 (stale), never an append over a change
    // the object has not seen.
    const state = await orNotFound(this.readState(appName, userId, sessionId));
    if (!state) return undefined;
    const session = createSession({
      id: sessionId,
      appName,
      userId,
      state,
      events: (found.events ?? []).map(toAdkEvent),
      lastUpdateTime: Date.parse(found.updated),
    });
    this.versions.set(session, found.version);
    return session;
  }

  /** A session whose events are too many for one answer: the session,
   * then its events in pages up to its last seq at that version. */
  private async readPaged(
    app: string,
    user: string,
    sid: string,
    recent: number | undefined,
    after: number | undefined,
  ): Promise<MemdSession | undefined> {
    const head = await orNotFound(this.memd.getSession({ app, user, sid }));
    if (!head) return undefined;
    const events: Schemas['Event'][] = [];
    for await (const ev of this.memd.events({ app, user, sid })) {
      if (ev.seq > head.last_seq) break;
      if (after && Date.parse(ev.timestamp) <= after) continue;
      events.push(ev);
    }
    head.events = recent ? events.slice(-recent) : events;
    return head;
  }

  /** memd's merged state of a session without temp: keys: session keys
   * plain, app: and user: keys with their prefixes, as ADK's mergeStates. */
  private async readState(app: string, user: string, sid: string): Promise<Record<string, unknown>> {
    return withoutTemp(await this.memd.getState({ app, user, sid }));
  }

  async listSessions({ appName, userId, limit, offset, page, order }: ListSessionsRequest): Promise<ListSessionsResponse> {
    if (!userId)
      throw new Error('MemdSessionService.listSessions: memd lists the sessions of one user; give userId');
    const all: Session[] = [];
    for await (const ms of this.memd.sessions({ app: appName, user: userId })) {
      if (ms.id === USER_ARTIFACTS_SESSION) continue;
      all.push(
        createSession({
          id: ms.id,
          appName,
          userId,
          state: {},
          events: [],
          lastUpdateTime: Date.parse(ms.updated),
        }),
      );
    }
    // ADK's order: by last update time, ties by id; none when not asked.
    if (order === 'asc') all.sort((a, b) => a.lastUpdateTime - b.lastUpdateTime || a.id.localeCompare(b.id));
    else if (order === 'desc') all.sort((a, b) => b.lastUpdateTime - a.lastUpdateTime || a.id.localeCompare(b.id));
    const totalItems = all.length;
    if (limit === undefined) {
      return {
        sessions: offset ? all.slice(offset) : all,
        page: 1,
        limit: totalItems,
        totalItems,
        totalPages: totalItems === 0 ? 0 : 1,
      };
    }
    const start = page !== undefined ? (page - 1) * limit : (offset ?? 0);
    return {
      sessions: all.slice(start, start + limit),
      page: page !== undefined ? page : limit === 0 ? 1 : Math.floor(start / limit) + 1,
      limit,
      totalItems,
      totalPages: limit === 0 ? 0 : Math.ceil(totalItems / limit),
    };
  }

  async deleteSession({ appName, userId, sessionId }: DeleteSessionRequest): Promise<void> {
    await orNotFound(this.memd.deleteSession({ app: appName, user: userId, sid: sessionId }));
  }

  /**
   * Appends event to memd, and then to the session object (its events and
   * state), as ADK's services do. A partial event is returned unchanged and
   * not stored. temp: keys are dropped from the event's stateDelta; the
   * rest goes into the same append's state_delta. The append carries the
   * version the object was read at: when memd's session moved on since
   * (another writer appended), onStale 'error' throws ADK's stale session
   * error and writes nothing, 'reload' reads the session into the object
   * again and appends.
   */
  async appendEvent({ session, event }: AppendEventRequest): Promise<Event> {
    if (event.partial) return event;
    if (!event.id) event.id = uuidv7();
    if (event.actions?.stateDelta) {
      const kept = withoutTemp(event.actions.stateDelta);
      if (Object.keys(kept).length !== Object.keys(event.actions.stateDelta).length)
        event.actions.stateDelta = kept;
    }
    const delta = event.actions?.stateDelta ?? {};
    const key = { app: session.appName, user: session.userId, sid: session.id };
    for (let attempt = 0; ; attempt++) {
      const body: Body<'appendEvents'> = { events: [toMemdEvent(event)] };
      if (Object.keys(delta).length > 0) body.state_delta = { ...delta };
      const usage = memdUsage(event);
      if (usage) body.usage = usage;
      const version = this.versions.get(session);
      if (version !== undefined) body.expected_version = version;
      try {
        const res = await this.memd.appendEvents(key, body);
        this.versions.set(session, res.version);
        break;
      } catch (err) {
        if (!isStatus(err, 409) || version === undefined) throw err;
        if (this.onStale === 'error' || attempt + 1 >= RELOAD_ATTEMPTS) throw await this.staleError(session, err);
        const fresh = await this.getSession({ appName: session.appName, userId: session.userId, sessionId: session.id });
        if (!fresh) throw err;
        session.events = fresh.events;
        session.state = fresh.state;
        session.lastUpdateTime = fresh.lastUpdateTime;
        this.versions.set(session, this.versions.get(fresh)!);
      }
    }
    await super.appendEvent({ session, event });
    session.lastUpdateTime = event.timestamp;
    return event;
  }

  /** ADK's error for an append on a stale session object (the message of
   * ADK's database session service for Python), with memd's versions. */
  private async staleError(session: Session, cause: unknown): Promise<Error> {
    const head = await orNotFound(
      this.memd.getSession({ app: session.appName, user: session.userId, sid: session.id }),
    );
    const storage = head ? head.updated : 'unknown';
    return withCause(new Error(
      `The last_update_time provided in the session object ${new Date(session.lastUpdateTime).toISOString()} ` +
        `is earlier than the update time in the storage_session ${storage}. ` +
        'Please check if it is a stale session. ' +
        `(memd: the session object is at version ${this.versions.get(session)}, ` +
        `the stored session at ${head?.version ?? 'unknown'}.)`,
    ), cause);
  }
}
