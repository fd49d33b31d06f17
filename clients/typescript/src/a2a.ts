// SPDX-License-Identifier: MIT
// @memd/client/a2a: memd as the task store of an A2A server built with
// @a2a-js/sdk (an optional peer dependency, A2A protocol 0.3): the SDK's
// DefaultRequestHandler keeps its tasks in memd (PUT and GET
// /v1/apps/{app}/tasks/{id}), so that they outlive the server's process,
// are shared by several servers, and can be listed with memd's other
// clients. Two servers updating one task never overwrite each other: every
// save is conditional on the version this store last read or wrote.
// MemdRequestHandler is the SDK's DefaultRequestHandler with a fix that
// answers a refused save to a blocking message/send.

import type { Task, TaskState } from '@a2a-js/sdk';
import { DefaultRequestHandler, type ServerCallContext, type TaskStore } from '@a2a-js/sdk/server';
import { MemdClient, MemdError, type Body, type Options } from './index.js';

/** MemdTaskStore's options: how to reach memd, and where the tasks go. */
export type MemdTaskStoreOptions = (
  | { client: MemdClient; baseUrl?: never; apiKey?: never }
  | { client?: never; baseUrl: string; apiKey?: string }
) & {
  /** The memd app the tasks belong to. */
  app: string;
  /**
   * The memd user the tasks belong to: each task's contextId is then one
   * of the user's sessions (a valid session id), and deleting that session
   * or the user deletes the task. Without it the tasks belong to the app
   * only.
   */
  user?: string;
};

/** The A2A states a task never leaves. */
export const TERMINAL_STATES: readonly TaskState[] = ['completed', 'canceled', 'failed', 'rejected'];

/**
 * How many tasks' versions a store remembers (the least recently used are
 * forgotten past it). A server loads a task before its first save of a
 * request, so only a task idle in this store while as many others were
 * used is forgotten; its next save is then a first save, refused with
 * reason `exists` if nothing loads it first.
 */
export const MAX_TRACKED_TASKS = 10_000;

/**
 * Why memd refused a save:
 * - `terminal`: memd's task is in a terminal state (completed, canceled,
 *   failed, rejected) and the save would have left it;
 * - `concurrent`: another writer (another A2A server, another store)
 *   updated the task since this store read or wrote it;
 * - `exists`: a first save (this store never read the task) of a task
 *   another writer had already created;
 * - `deleted`: the task was deleted from memd since this store read it.
 */
export type TaskConflictReason = 'terminal' | 'concurrent' | 'exists' | 'deleted';

/**
 * A save memd refused (409, or 404 for a task deleted meanwhile): nothing
 * was written. The store keeps the version it had, so every further save
 * of the task fails the same way until the task is loaded again, which
 * the A2A SDK does at its next request for the task. The request fails
 * with it: the A2A client gets a JSON-RPC internal error with this message
 * (for a blocking message/send or a tasks/cancel, with MemdRequestHandler).
 */
export class MemdTaskConflictError extends Error {
  /** The task's id. */
  readonly taskId: string;
  readonly reason: TaskConflictReason;
  /** The state the save would have written. */
  readonly state: TaskState;
  /** memd's task's state, when it was read after the refusal. */
  readonly storedState: TaskState | undefined;
  /** memd's task's version, when it was read after the refusal. */
  readonly storedVersion: number | undefined;
  /** The version the save was conditional on (undefined for a first save). */
  readonly expectedVersion: number | undefined;

  constructor(init: {
    taskId: string; reason: TaskConflictReason; state: TaskState; storedState?: TaskState;
    storedVersion?: number; expectedVersion?: number; cause: MemdError;
  }) {
    super(conflictMessage(init));
    this.name = 'MemdTaskConflictError';
    this.taskId = init.taskId;
    this.reason = init.reason;
    this.state = init.state;
    this.storedState = init.storedState;
    this.storedVersion = init.storedVersion;
    this.expectedVersion = init.expectedVersion;
    Object.defineProperty(this, 'cause', { value: init.cause, enumerable: false, configurable: true, writable: true });
  }
}

/* What MemdTaskConflictError says: what happened, what memd has, that
 * nothing was written, and what to do. */
function conflictMessage(c: {
  taskId: string; reason: TaskConflictReason; state: TaskState; storedState?: TaskState;
  storedVersion?: number; expectedVersion?: number; cause: MemdError;
}): string {
  const id = `task ${c.taskId}`;
  const refused = 'the save was refused and nothing was written';
  const memd = `(memd: ${c.cause.message})`;
  switch (c.reason) {
    case 'terminal':
      return `memd task store: ${id} is ${c.storedState} in memd, a terminal state, and cannot become ` +
        `${c.state}: ${refused} ${memd}`;
    case 'exists':
      return `memd task store: ${id} already exists in memd (version ${c.storedVersion ?? '?'}) and this store ` +
        `has not read it, so saving it would overwrite another writer's task: ${refused}; load it first ${memd}`;
    case 'deleted':
      return `memd task store: ${id} was deleted from memd after this store read it (version ` +
        `${c.expectedVersion}): ${refused} ${memd}`;
    case 'concurrent':
      return `memd task store: ${id} was updated by another writer since this store read it (memd has version ` +
        `${c.storedVersion ?? '?'}, this store read version ${c.expectedVersion}): ${refused}; load it again ${memd}`;
  }
}

/* One task as memd answers PUT and GET .../tasks/{id}. */
interface StoredTask {
  task: Task;
  version: number;
}

/**
 * An A2A TaskStore over memd: `new DefaultRequestHandler(card, new
 * MemdTaskStore({ client, app }), executor)`.
 *
 * - `load(taskId)` is GET /v1/apps/{app}/tasks/{id}: the task with its
 *   whole history, or undefined when memd has none.
 * - `save(task)` is PUT /v1/apps/{app}/tasks/{id} (`?user=` with the
 *   option `user`), conditional on the version of the task this store last
 *   loaded or saved (`If-Match`), or create-only (`If-None-Match: *`) for a
 *   task it has not seen. A refused save throws MemdTaskConflictError (a
 *   terminal state left, another writer's update, a task that exists or
 *   was deleted) and writes nothing; other failures throw MemdError.
 *
 * Within one store the loads and saves of one task run one at a time, in
 * the order they were called: the SDK's request handler saves one task
 * from several places of one process (a stream and a cancel of it), which
 * must not refuse each other; they overwrite each other as with the SDK's
 * InMemoryTaskStore. Separate stores (separate servers) are separate
 * writers.
 */
export class MemdTaskStore implements TaskStore {
  readonly #client: MemdClient;
  readonly #app: string;
  readonly #user: string | undefined;
  /* Task id -> the version this store last read or wrote (least recently used first). */
  readonly #versions = new Map<string, number>();
  /* Task id -> the end of its queue of loads and saves. */
  readonly #queues = new Map<string, Promise<unknown>>();

  constructor(options: MemdTaskStoreOptions) {
    if (!options || typeof options.app !== 'string' || options.app === '') {
      throw new TypeError('MemdTaskStore: app is required');
    }
    if (options.client) {
      this.#client = options.client;
    } else if (options.baseUrl) {
      this.#client = new MemdClient({ baseUrl: options.baseUrl, apiKey: options.apiKey });
    } else {
      throw new TypeError('MemdTaskStore: give client or baseUrl');
    }
    this.#app = options.app;
    this.#user = options.user;
  }

  /** The task memd has under taskId (its whole history), or undefined. */
  load(taskId: string, _context?: ServerCallContext): Promise<Task | undefined> {
    return this.#queued(taskId, async () => {
      let stored: StoredTask;
      try {
        stored = await this.#get(taskId);
      } catch (err) {
        if (err instanceof MemdError && err.status === 404) {
          this.#versions.delete(taskId);
          return undefined;
        }
        throw err;
      }
      this.#remember(taskId, stored.version);
      return stored.task;
    });
  }

  /**
   * Stores task in memd if no one else changed it since this store last
   * read or wrote it; else throws MemdTaskConflictError and writes nothing.
   */
  save(task: Task, _context?: ServerCallContext): Promise<void> {
    if (!task || typeof task.id !== 'string' || task.id === '') {
      return Promise.reject(new TypeError('MemdTaskStore.save: the task has no id'));
    }
    const taskId = task.id;
    // As it is now: the caller may change the object while the save waits its turn.
    const body = JSON.parse(JSON.stringify(task)) as Task;
    return this.#queued(taskId, async () => {
      const expected = this.#versions.get(taskId);
      // Conditional, so never repeated by the client after a lost answer
      // (a repeat would be refused as the first attempt's own conflict).
      const condition: Options<'putTask'> = expected === undefined ? { ifNoneMatch: '*' } : { ifMatch: expected };
      let stored: StoredTask;
      try {
        stored = await this.#client.putTask(
          { app: this.#app, tid: taskId, user: this.#user }, body as unknown as Body<'putTask'>, condition,
        ) as unknown as StoredTask;
      } catch (err) {
        if (err instanceof MemdError && (err.status === 409 || (err.status === 404 && expected !== undefined))) {
          throw await this.#conflict(body, expected, err);
        }
        throw err;
      }
      this.#remember(taskId, stored.version);
    });
  }

  /* GET the task (a 404 rejects with MemdError). */
  async #get(taskId: string): Promise<StoredTask> {
    return await this.#client.getTask({ app: this.#app, tid: taskId }) as unknown as StoredTask;
  }

  /* The error for a save memd refused with err: reads memd's task to say why. */
  async #conflict(task: Task, expected: number | undefined, err: MemdError): Promise<MemdTaskConflictError> {
    const base = { taskId: task.id, state: task.status?.state, expectedVersion: expected, cause: err };
    let stored: StoredTask;
    try {
      stored = await this.#get(task.id);
    } catch (readErr) {
      if (!(readErr instanceof MemdError)) throw readErr;
      // Not readable now (gone, or memd unreachable): what the refusal itself says.
      const gone = readErr.status === 404 && expected !== undefined;
      return new MemdTaskConflictError({ ...base, reason: gone ? 'deleted' : expected === undefined ? 'exists' : 'concurrent' });
    }
    const storedState = stored.task.status?.state;
    const info = { ...base, storedState, storedVersion: stored.version };
    if (TERMINAL_STATES.includes(storedState) && storedState !== task.status?.state) {
      return new MemdTaskConflictError({ ...info, reason: 'terminal' });
    }
    return new MemdTaskConflictError({ ...info, reason: expected === undefined ? 'exists' : 'concurrent' });
  }

  /* Remembers taskId's version as the most recently used, forgetting the
   * least recently used past MAX_TRACKED_TASKS. */
  #remember(taskId: string, version: number): void {
    this.#versions.delete(taskId);
    this.#versions.set(taskId, version);
    if (this.#versions.size > MAX_TRACKED_TASKS) {
      const oldest = this.#versions.keys().next().value;
      if (oldest !== undefined) this.#versions.delete(oldest);
    }
  }

  /* Runs op after every load and save of taskId called before it. */
  #queued<T>(taskId: string, op: () => Promise<T>): Promise<T> {
    const previous = this.#queues.get(taskId) ?? Promise.resolve();
    const result = previous.then(op, op);
    const tail = result.then(() => undefined, () => undefined);
    this.#queues.set(taskId, tail);
    void tail.then(() => {
      if (this.#queues.get(taskId) === tail) this.#queues.delete(taskId);
    });
    return result;
  }
}

/* The method of DefaultRequestHandler that MemdRequestHandler replaces
 * (private in the SDK's declarations). */
interface ProcessingErrorHandler {
  _handleProcessingError(
    error: unknown, resultManager: unknown, firstResultSent: boolean, taskId: string,
    firstResultRejector?: (reason: unknown) => void,
  ): Promise<void>;
}

/**
 * The SDK's DefaultRequestHandler, but a task store's error while it
 * processes the agent's events in a blocking `message/send` (the default)
 * or a `tasks/cancel` fails that request, with the error's message as its
 * JSON-RPC error. @a2a-js/sdk 0.3.14 hands that error to an error handler
 * it does not wait for, which throws it again: the client is answered the
 * task as the process holds it (with nothing saved), and the error is an
 * unhandled promise rejection, which ends a Node process by default. A
 * streaming request and a non-blocking send are handled as the SDK does
 * (the stream ends with the error). Everything else is
 * DefaultRequestHandler's.
 */
export class MemdRequestHandler extends DefaultRequestHandler {}

const sdkHandler = DefaultRequestHandler.prototype as unknown as Partial<ProcessingErrorHandler>;
if (typeof sdkHandler._handleProcessingError === 'function') {
  const handleProcessingError = sdkHandler._handleProcessingError;
  Object.defineProperty(MemdRequestHandler.prototype, '_handleProcessingError', {
    configurable: true,
    writable: true,
    value: function (this: ProcessingErrorHandler, ...args: Parameters<ProcessingErrorHandler['_handleProcessingError']>) {
      // Thrown here, synchronously, it leaves the SDK's catch block and
      // rejects the request that is waiting for the events' end.
      if (!args[4]) throw args[0];
      return handleProcessingError.apply(this, args);
    },
  });
}
