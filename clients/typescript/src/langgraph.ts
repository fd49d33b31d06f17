// SPDX-License-Identifier: MIT
// @memd/client/langgraph: MemdSaver, a LangGraph checkpointer
// (BaseCheckpointSaver of @langchain/langgraph-checkpoint) on memd's run
// checkpoints. A LangGraph thread is a memd session of one app and user;
// its checkpoints, pending writes and run state live in memd, so a run
// killed in one process resumes in another, and memd's resumable listing
// says which threads were left running or wait for a human.

import {
  BaseCheckpointSaver, INTERRUPT, RESUME, TASKS, WRITES_IDX_MAP, copyCheckpoint, getCheckpointId, maxChannelVersion,
} from '@langchain/langgraph-checkpoint';
import type {
  ChannelVersions, Checkpoint, CheckpointListOptions, CheckpointMetadata, CheckpointPendingWrite, CheckpointTuple,
  PendingWrite, SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';
import { MemdClient, MemdError, type Body, type Schemas } from './index.js';

/** How MemdSaver reaches memd: a MemdClient, or what makes one. */
export type MemdSaverConnection =
  | { client: MemdClient; baseUrl?: never; apiKey?: never }
  | { client?: never; baseUrl: string; apiKey?: string };

export type MemdSaverOptions = MemdSaverConnection & {
  /** memd's app the threads belong to. */
  app: string;
  /** memd's user the threads belong to: list() without a thread_id lists
   * this user's threads. */
  user: string;
  /** The serializer of checkpoints and writes (default LangGraph's
   * JsonPlusSerializer). */
  serde?: SerializerProtocol;
  /** A channel that has not changed for this long (by the checkpoints'
   * `ts`) is stored again in the checkpoint being put rather than
   * referred to, so that a checkpoint never outlives by more than this
   * the one holding its channels' values (memd expires each checkpoint
   * checkpoints.timeout_s after its own put). Default 10 minutes. */
  reanchorMs?: number;
};

/** What the run a checkpoint belongs to is doing (memd's run_state). */
export type RunState = 'running' | 'interrupted' | 'done';

/** reanchorMs's default. */
export const DEFAULT_REANCHOR_MS = 10 * 60 * 1000;
/** Checkpoints list() asks memd for per page when it has no limit. */
const LIST_PAGE = 100;
/** memd's largest page. */
const LIST_PAGE_MAX = 1000;
/** Entries of the saver's record of recent checkpoints (parents of the
 * next put): one per thread and namespace a graph runs in is enough. */
const RECENT_MAX = 256;
/** The task id of finish's empty write (memd needs one; nothing is stored). */
const FINISH_TASK = 'memd:finish';
/** How long putWrites waits for the put of its checkpoint (ms) before it
 * sends the writes anyway (and memd answers 404 if it never came). */
const WRITES_WAIT_MS = 120_000;
/** Version of the stored envelope (StoredCheckpoint.v). */
const ENVELOPE_VERSION = 1;

/**
 * What a checkpoint's payload holds: the checkpoint with the values of the
 * channels that changed in its step (newVersions) and, for every other
 * channel with a value, where that value is stored: [checkpoint id, its
 * ts] of the ancestor (same thread and namespace) that wrote the
 * channel's current version. A reader takes those values from there.
 */
interface StoredCheckpoint {
  v: number;
  checkpoint: Checkpoint;
  carried: Record<string, [string, string]>;
}

/** What put needs to know of a parent: which channel versions it can
 * give a child, and where each value lives. */
interface Lineage {
  id: string;
  ts: string;
  versions: ChannelVersions;
  /** channel -> [id, ts] of the checkpoint holding the value of the
   * parent's version of it. */
  origin: Record<string, [string, string]>;
}

/** A checkpoint as memd answers it with its payload and writes. */
type Tuple = Schemas['CheckpointTuple'];

/* Base64 (standard alphabet, padded) of bytes and back, with btoa and
 * atob (Node 16+ and browsers), a chunk of characters at a time. */
const BASE64_CHUNK = 0x8000;
function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += BASE64_CHUNK) {
    s += String.fromCharCode(...bytes.subarray(i, i + BASE64_CHUNK));
  }
  return btoa(s);
}
function fromBase64(text: string): Uint8Array {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function isNotFound(err: unknown): boolean {
  return err instanceof MemdError && err.status === 404;
}

function threadOf(config: RunnableConfig, what: string): string {
  if (!config || !config.configurable) {
    throw new Error(`MemdSaver.${what}: config.configurable is missing (it needs a thread_id)`);
  }
  const thread = config.configurable.thread_id;
  if (thread === undefined || thread === null || thread === '') {
    throw new Error(`MemdSaver.${what}: config.configurable.thread_id is missing`);
  }
  return String(thread);
}

function configOf(thread: string, ns: string, id: string): RunnableConfig {
  return { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: id } };
}

/**
 * LangGraph's checkpointer on memd. Options: `{client}` or `{baseUrl,
 * apiKey}`, `app`, `user`, optionally `serde`. Passes
 * @langchain/langgraph-checkpoint-validation.
 */
export class MemdSaver extends BaseCheckpointSaver {
  readonly client: MemdClient;
  readonly app: string;
  readonly user: string;
  readonly reanchorMs: number;
  /* Lineage of the checkpoints this saver put or read last, by
   * thread\0ns\0id, oldest first (a put's parent is nearly always here). */
  readonly #recent = new Map<string, Lineage>();
  /* The puts on their way, by thread\0ns\0id. */
  readonly #putting = new Map<string, Promise<RunnableConfig>>();
  /* Writes waiting for the put of their checkpoint, by thread\0ns\0id. */
  readonly #arrivals = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  /* The greatest checkpoint id this saver put or read, by thread\0ns. */
  readonly #newest = new Map<string, string>();

  constructor(options: MemdSaverOptions) {
    super(options?.serde);
    if (!options || typeof options.app !== 'string' || options.app === '') {
      throw new TypeError('MemdSaver: app is required');
    }
    if (typeof options.user !== 'string' || options.user === '') throw new TypeError('MemdSaver: user is required');
    if (options.client) this.client = options.client;
    else if (options.baseUrl) this.client = new MemdClient({ baseUrl: options.baseUrl, apiKey: options.apiKey });
    else throw new TypeError('MemdSaver: give client or baseUrl');
    this.app = options.app;
    this.user = options.user;
    this.reanchorMs = options.reanchorMs ?? DEFAULT_REANCHOR_MS;
  }

  #remember(thread: string, ns: string, lineage: Lineage): void {
    const key = `${thread}\0${ns}\0${lineage.id}`;
    this.#recent.delete(key);
    this.#recent.set(key, lineage);
    if (this.#recent.size > RECENT_MAX) this.#recent.delete(this.#recent.keys().next().value as string);
  }

  async #unpack(tuple: Tuple): Promise<StoredCheckpoint> {
    if (tuple.checkpoint === undefined) throw new Error('MemdSaver: memd answered a checkpoint without its payload');
    const stored = (await this.serde.loadsTyped(tuple.type, fromBase64(tuple.checkpoint))) as StoredCheckpoint;
    if (!stored || stored.v !== ENVELOPE_VERSION || !stored.checkpoint) {
      throw new Error(
        `MemdSaver: checkpoint ${tuple.checkpoint_id} of thread ${tuple.session_id} was not written by MemdSaver`);
    }
    stored.carried ??= {};
    return stored;
  }

  #lineageOf(stored: StoredCheckpoint): Lineage {
    const cp = stored.checkpoint;
    const origin: Record<string, [string, string]> = { ...stored.carried };
    for (const ch of Object.keys(cp.channel_values ?? {})) origin[ch] = [cp.id, cp.ts];
    return { id: cp.id, ts: cp.ts, versions: { ...cp.channel_versions }, origin };
  }

  /* The tuple memd answered as LangGraph's: the checkpoint with its
   * carried channels' values read from their checkpoints (fetch caches
   * them for one call), pending sends migrated for v < 4. */
  async #toTuple(
    tuple: Tuple, fetch: (ns: string, thread: string, id: string) => Promise<Tuple | undefined>,
  ): Promise<CheckpointTuple> {
    const thread = tuple.session_id;
    const ns = tuple.checkpoint_ns;
    const stored = await this.#unpack(tuple);
    this.#remember(thread, ns, this.#lineageOf(stored));
    this.#saw(thread, ns, tuple.checkpoint_id);
    const checkpoint = stored.checkpoint;
    checkpoint.channel_values ??= {};
    const byOrigin = new Map<string, string[]>();
    for (const [ch, [id]] of Object.entries(stored.carried)) {
      const chans = byOrigin.get(id) ?? [];
      chans.push(ch);
      byOrigin.set(id, chans);
    }
    await Promise.all([...byOrigin].map(async ([id, chans]) => {
      const from = await fetch(ns, thread, id);
      if (!from) {
        throw new Error(`MemdSaver: checkpoint ${tuple.checkpoint_id} of thread ${thread} keeps channels ` +
          `${chans.join(', ')} in checkpoint ${id}, which memd no longer has (expired or deleted)`);
      }
      const values = (await this.#unpack(from)).checkpoint.channel_values ?? {};
      for (const ch of chans) checkpoint.channel_values[ch] = values[ch];
    }));
    const parent = tuple.parent_checkpoint_id ?? undefined;
    if (checkpoint.v < 4 && parent !== undefined) {
      const p = await fetch(ns, thread, parent);
      const sends = (p?.pending_writes ?? []).filter((w) => w.channel === TASKS);
      checkpoint.channel_values[TASKS] = await Promise.all(
        sends.map((w) => this.serde.loadsTyped(w.type, fromBase64(w.value))));
      checkpoint.channel_versions[TASKS] = Object.keys(checkpoint.channel_versions).length > 0
        ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
        : this.getNextVersion(undefined);
    }
    /* In memd's order, (task_path, task_id, idx) by code point: LangGraph's
     * writesSortKey order, which its readers of pendingWrites rely on. */
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all((tuple.pending_writes ?? []).map(
      async (w): Promise<CheckpointPendingWrite> =>
        [w.task_id, w.channel, await this.serde.loadsTyped(w.type, fromBase64(w.value))]));
    const out: CheckpointTuple = {
      config: configOf(thread, ns, tuple.checkpoint_id),
      checkpoint,
      metadata: tuple.metadata as CheckpointMetadata,
      pendingWrites,
    };
    if (parent !== undefined) out.parentConfig = configOf(thread, ns, parent);
    return out;
  }

  /* A fetch of checkpoints by id for one call, each read once. */
  #fetcher(): (ns: string, thread: string, id: string) => Promise<Tuple | undefined> {
    const seen = new Map<string, Promise<Tuple | undefined>>();
    return (ns, thread, id) => {
      const key = `${thread}\0${ns}\0${id}`;
      let p = seen.get(key);
      if (!p) {
        p = this.#get(thread, ns, id);
        seen.set(key, p);
      }
      return p;
    };
  }

  /* One checkpoint with its writes, or undefined. */
  async #get(thread: string, ns: string, id: string | undefined): Promise<Tuple | undefined> {
    try {
      if (id) {
        return await this.client.getCheckpoint({
          app: this.app, user: this.user, sid: thread, cid: id, checkpoint_ns: ns,
        });
      }
      return await this.client.getLatestCheckpoint({ app: this.app, user: this.user, sid: thread, checkpoint_ns: ns });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const thread = config.configurable?.thread_id;
    if (thread === undefined || thread === null || thread === '') return undefined;
    const ns: string = config.configurable?.checkpoint_ns ?? '';
    const id = getCheckpointId(config) || undefined;
    const tuple = await this.#get(String(thread), ns, id);
    return tuple ? this.#toTuple(tuple, this.#fetcher()) : undefined;
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options ?? {};
    let limit = options?.limit;
    if (limit !== undefined && limit <= 0) return;
    const thread = config.configurable?.thread_id;
    const ns: string | undefined = config.configurable?.checkpoint_ns;
    const only = config.configurable?.checkpoint_id as string | undefined;
    const metadata = filter && Object.keys(filter).length > 0 ? JSON.stringify(filter) : undefined;
    const query = {
      checkpoint_ns: ns,
      before: before ? getCheckpointId(before) || undefined : undefined,
      metadata,
      full: true,
    };
    const fetch = this.#fetcher();
    let cursor: string | undefined;
    do {
      const page = Math.min(limit ?? LIST_PAGE, LIST_PAGE_MAX);
      let answer: { checkpoints: unknown[]; next_cursor: string | null };
      try {
        answer = thread !== undefined && thread !== null && thread !== ''
          ? await this.client.listSessionCheckpoints({
            app: this.app, user: this.user, sid: String(thread), ...query, limit: page, cursor,
          })
          : await this.client.listCheckpoints({ app: this.app, user: this.user, ...query, limit: page, cursor });
      } catch (err) {
        if (isNotFound(err)) return;
        throw err;
      }
      /* Tuples, not summaries: the list asked for full=true. */
      for (const t of answer.checkpoints as Tuple[]) {
        if (only && t.checkpoint_id !== only) continue;
        yield await this.#toTuple(t, fetch);
        if (limit !== undefined && --limit <= 0) return;
      }
      cursor = answer.next_cursor ?? undefined;
    } while (cursor);
  }

  /* The lineage of a put's parent: from this saver's record, else read. */
  async #parentLineage(thread: string, ns: string, id: string): Promise<Lineage | undefined> {
    const known = this.#recent.get(`${thread}\0${ns}\0${id}`);
    if (known) return known;
    const tuple = await this.#get(thread, ns, id);
    return tuple ? this.#lineageOf(await this.#unpack(tuple)) : undefined;
  }

  async put(
    config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const thread = threadOf(config, 'put');
    const ns: string = config.configurable?.checkpoint_ns ?? '';
    /* LangGraph (durability "async") may put a checkpoint's writes while
     * its put is still on its way; memd takes writes only for a stored
     * checkpoint, so putWrites waits for the put of its checkpoint. */
    const key = `${thread}\0${ns}\0${checkpoint.id}`;
    this.#saw(thread, ns, checkpoint.id);
    const work = this.#put(config, thread, ns, checkpoint, metadata, newVersions);
    this.#putting.set(key, work);
    try {
      return await work;
    } finally {
      if (this.#putting.get(key) === work) this.#putting.delete(key);
      this.#arrivals.get(key)?.resolve();
      this.#arrivals.delete(key);
    }
  }

  /* Records id as seen in (thread, ns): put, or read. */
  #saw(thread: string, ns: string, id: string): void {
    const k = `${thread}\0${ns}`;
    const newest = this.#newest.get(k);
    if (newest === undefined || id > newest) this.#newest.set(k, id);
  }

  /* Resolves once this saver has put the checkpoint key, or after
   * WRITES_WAIT_MS. */
  #arrival(key: string): Promise<void> {
    let a = this.#arrivals.get(key);
    if (!a) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => { resolve = r; });
      a = { promise, resolve };
      this.#arrivals.set(key, a);
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<void>((r) => {
      timer = setTimeout(r, WRITES_WAIT_MS);
      (timer as { unref?: () => void }).unref?.();
    });
    return Promise.race([a.promise, timeout]).finally(() => clearTimeout(timer));
  }

  async #put(
    config: RunnableConfig, thread: string, ns: string, checkpoint: Checkpoint, metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const parentId: string | undefined = config.configurable?.checkpoint_id || undefined;
    const cp = copyCheckpoint(checkpoint);
    const parent = parentId ? await this.#parentLineage(thread, ns, parentId) : undefined;
    /* A channel's value is stored here when its version is new in this
     * step; else it is the value of the same version in an ancestor, found
     * through the parent's lineage (stored again when that is older than
     * reanchorMs, or when the parent is unknown to memd). A channel whose
     * version no checkpoint of the line wrote has no value. */
    const values: Record<string, unknown> = {};
    const carried: Record<string, [string, string]> = {};
    const now = Date.parse(cp.ts);
    for (const [ch, value] of Object.entries(cp.channel_values)) {
      if (Object.prototype.hasOwnProperty.call(newVersions, ch) || (parentId && !parent)) {
        values[ch] = value;
        continue;
      }
      if (!parent || parent.versions[ch] !== cp.channel_versions[ch]) continue;
      const origin = parent.origin[ch];
      if (!origin) continue;
      const age = now - Date.parse(origin[1]);
      if (!(age <= this.reanchorMs)) values[ch] = value;
      else carried[ch] = origin;
    }
    const stored: StoredCheckpoint = { v: ENVELOPE_VERSION, checkpoint: { ...cp, channel_values: values }, carried };
    const [type, bytes] = await this.serde.dumpsTyped(stored);
    const body: Body<'putCheckpoint'> = {
      parent_checkpoint_id: parentId ?? null,
      type,
      checkpoint: toBase64(bytes),
      metadata: JSON.parse(JSON.stringify(metadata ?? {})) as Record<string, unknown>,
    };
    await this.client.putCheckpoint(
      { app: this.app, user: this.user, sid: thread, cid: cp.id, checkpoint_ns: ns }, body);
    this.#remember(thread, ns, this.#lineageOf(stored));
    return configOf(thread, ns, cp.id);
  }

  /**
   * Stores a task's writes to a checkpoint. `taskPath` (LangGraph's path of
   * the task, "" or undefined = none) is kept with them: memd answers a
   * checkpoint's pending writes ordered by (taskPath, taskId, idx), the
   * order LangGraph applies a step's writes in (`writesSortKey`).
   */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const thread = threadOf(config, 'putWrites');
    const ns: string = config.configurable?.checkpoint_ns ?? '';
    const id: string | undefined = config.configurable?.checkpoint_id;
    if (!id) throw new Error('MemdSaver.putWrites: config.configurable.checkpoint_id is missing');
    /* LangGraph (durability "async", its default) puts a step's writes
     * while the step's checkpoint is still being put, or before its put
     * was even called (its puts go one after the other). memd takes writes
     * only for a stored checkpoint: the writes wait for their checkpoint's
     * put in this saver (a newer id than any it put or read is one to
     * come; an unknown thread's first writes learn it from memd's 404). */
    const key = `${thread}\0${ns}\0${id}`;
    const newest = this.#newest.get(`${thread}\0${ns}`);
    let waited = false;
    const putting = this.#putting.get(key);
    if (putting) {
      await putting.catch(() => undefined);
      waited = true;
    } else if (newest !== undefined && id > newest) {
      await this.#arrival(key);
      await this.#putting.get(key)?.catch(() => undefined);
      waited = true;
    }
    let runState: RunState | undefined;
    const out: Body<'putCheckpointWrites'>['writes'] = await Promise.all(writes.map(async ([channel, value], idx) => {
      const [type, bytes] = await this.serde.dumpsTyped(value);
      const special = Object.prototype.hasOwnProperty.call(WRITES_IDX_MAP, channel);
      return { idx: special ? WRITES_IDX_MAP[channel] : idx, channel, type, value: toBase64(bytes), replace: special };
    }));
    /* A run waits for a human from its interrupt on, runs again from the
     * resume LangGraph writes when it is resumed. */
    if (writes.some(([channel]) => channel === INTERRUPT)) runState = 'interrupted';
    else if (writes.some(([channel]) => channel === RESUME)) runState = 'running';
    const send = () => this.client.putCheckpointWrites(
      { app: this.app, user: this.user, sid: thread, cid: id, checkpoint_ns: ns },
      {
        task_id: taskId,
        ...(taskPath ? { task_path: taskPath } : {}),
        writes: out,
        ...(runState ? { run_state: runState } : {}),
      });
    try {
      await send();
    } catch (err) {
      if (waited || !isNotFound(err)) throw err;
      await this.#arrival(key);
      await this.#putting.get(key)?.catch(() => undefined);
      await send();
    }
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.client.deleteCheckpoints({ app: this.app, user: this.user, sid: String(threadId) });
    for (const map of [this.#recent, this.#newest]) {
      for (const key of [...map.keys()]) {
        if (key.startsWith(`${threadId}\0`)) map.delete(key);
      }
    }
  }

  /**
   * Marks the thread's run done (its newest root checkpoint, or the one
   * config names): memd's resumable listing leaves it out from then on.
   * Call it when a run completed and nothing should resume it.
   */
  async finish(config: RunnableConfig): Promise<void> {
    const thread = threadOf(config, 'finish');
    const ns: string = config.configurable?.checkpoint_ns ?? '';
    let id: string | undefined = getCheckpointId(config) || undefined;
    if (!id) {
      const latest = await this.#get(thread, ns, undefined);
      if (!latest) throw new Error(`MemdSaver.finish: thread ${thread} has no checkpoint`);
      id = latest.checkpoint_id;
    }
    await this.client.putCheckpointWrites(
      { app: this.app, user: this.user, sid: thread, cid: id, checkpoint_ns: ns },
      { task_id: FINISH_TASK, writes: [], run_state: 'done' });
  }
}
