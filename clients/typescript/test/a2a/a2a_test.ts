// SPDX-License-Identifier: MIT
// memd as the task store of an A2A server, against a real memd serve: the
// SDK's own DefaultRequestHandler and JSON-RPC transport (agent.ts) over a
// MemdTaskStore, in child processes (server.ts), spoken to with the SDK's
// client: message/send, message/stream, tasks/cancel, tasks/get with
// historyLength, tasks/resubscribe after the server process was killed
// and started again; memd's own REST view of the tasks agrees; and the
// store's conditional saves: a terminal state is kept, two stores racing
// on one task end with one winner and a clear error for the other, also
// between two A2A servers, where MemdRequestHandler answers the refusal to
// a blocking message/send.
// Usage: MEMD_URL=... node --test a2a_test.js (tests/clients/a2a_test.sh runs it).

import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent } from '@a2a-js/sdk';
import { ClientFactory, TaskNotCancelableError, type Client } from '@a2a-js/sdk/client';
import { MemdClient, MemdError, uuidv7 } from '../../src/index.js';
import { MemdTaskConflictError, MemdTaskStore } from '../../src/a2a.js';
import { RESULT_ARTIFACT } from './agent.js';

const baseUrl = process.env.MEMD_URL;
if (!baseUrl) {
  console.error('usage: MEMD_URL=http://HOST:PORT node --test a2a_test.js');
  process.exit(2);
}
const memd = new MemdClient({ baseUrl });
const APP = `a2a-${uuidv7()}`;

/** How long a child server may take to listen, or an awaited event to come (bounds, not delays). */
const WAIT_MS = 60_000;

/** p, or a failure naming what did not happen within WAIT_MS. */
async function within<T>(what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${WAIT_MS} ms`)), WAIT_MS);
  });
  try {
    return await Promise.race([p, limit]);
  } finally {
    clearTimeout(timer);
  }
}

/** An A2A server process (server.ts) and an SDK client of it. */
interface ServerProcess {
  url: string;
  child: ChildProcess;
  client: Client;
}

const children = new Set<ChildProcess>();
test.after(() => {
  for (const c of children) c.kill('SIGKILL');
});

/**
 * Starts server.ts over memd's APP (with MemdRequestHandler for `memd`,
 * else the SDK's DefaultRequestHandler) and waits (bounded) until it
 * listens.
 */
async function startServer(handler: 'default' | 'memd' = 'default'): Promise<ServerProcess> {
  const script = fileURLToPath(new URL('./server.js', import.meta.url));
  const child = spawn(process.execPath, [script, baseUrl!, APP, handler], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  child.on('exit', () => children.delete(child));
  const lines = createInterface({ input: child.stdout! });
  const first = new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code, signal) => reject(new Error(`server.js exited (${code ?? signal}) before it listened`)));
  });
  const { url } = JSON.parse(await within('A2A server listening', first)) as { url: string };
  return { url, child, client: await new ClientFactory().createFromUrl(url) };
}

/** Kills the server process (SIGKILL: no chance to save anything) and waits until it is gone. */
async function kill(s: ServerProcess): Promise<void> {
  const gone = once(s.child, 'exit');
  s.child.kill('SIGKILL');
  await within('server exit', gone);
}

/** A user message (text), optionally on a task and in a context. */
function userMessage(text: string, ids: { taskId?: string; contextId?: string } = {}): Message {
  return { kind: 'message', role: 'user', messageId: uuidv7(), parts: [{ kind: 'text', text }], ...ids };
}

/** What the A2A stream delivers. */
type StreamEvent = Message | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent;

/** The events' kinds and states, e.g. ['task:submitted', 'status-update:working', 'artifact-update', ...]. */
function shape(events: StreamEvent[]): string[] {
  return events.map((e) =>
    e.kind === 'task' || e.kind === 'status-update' ? `${e.kind}:${e.status.state}${'final' in e && e.final ? ':final' : ''}` : e.kind);
}

/** Reads it until an event matches (bounded), returning what it read. */
async function readUntil(
  it: AsyncIterator<StreamEvent>, what: string, done: (e: StreamEvent) => boolean,
): Promise<StreamEvent[]> {
  const seen: StreamEvent[] = [];
  for (;;) {
    const r = await within(what, it.next());
    if (r.done) assert.fail(`the stream ended before ${what}: ${JSON.stringify(shape(seen))}`);
    seen.push(r.value);
    if (done(r.value)) return seen;
  }
}

/** Reads it to its end (bounded). */
async function readAll(it: AsyncIterator<StreamEvent>, what: string): Promise<StreamEvent[]> {
  const seen: StreamEvent[] = [];
  for (;;) {
    const r = await within(what, it.next());
    if (r.done) return seen;
    seen.push(r.value);
  }
}

/** The text of the task's artifact `result`. */
function resultText(task: Task): string | undefined {
  const part = task.artifacts?.find((a) => a.artifactId === RESULT_ARTIFACT)?.parts[0];
  return part?.kind === 'text' ? part.text : undefined;
}

/** Any memd answer, loosely typed for the checks. */
type Json = Record<string, any>;

/** memd's own view of a task: GET /v1/apps/{app}/tasks/{id}. */
async function memdTask(id: string, historyLength?: number): Promise<Json> {
  return await memd.getTask({ app: APP, tid: id, history_length: historyLength }) as Json;
}

/** Lets a task the server process holds finish (the agent's test route). */
async function release(s: ServerProcess, taskId: string): Promise<void> {
  const res = await fetch(`${s.url}/test/release/${encodeURIComponent(taskId)}`, { method: 'POST' });
  assert.equal(res.status, 204, `server ${s.url} holds no task ${taskId}`);
}

let server: ServerProcess;
test.before(async () => {
  server = await startServer();
});

test('message/send: a completed task with its artifact, stored in memd', async () => {
  const sent = await server.client.sendMessage({ message: userMessage('run hello world') });
  assert.equal(sent.kind, 'task');
  const task = sent as Task;
  assert.equal(task.status.state, 'completed');
  assert.equal(resultText(task), 'HELLO WORLD');
  const stored = await memdTask(task.id);
  assert.equal(stored.task.status.state, 'completed');
  assert.equal(stored.task.contextId, task.contextId);
  assert.deepEqual(stored.task.artifacts, task.artifacts);
  assert.equal(stored.task.history[0].parts[0].text, 'run hello world');
  assert.ok(Number.isInteger(stored.version) && stored.version > 1, `version ${stored.version}`);
  // What the store loads is what memd holds.
  assert.deepEqual(await new MemdTaskStore({ client: memd, app: APP }).load(task.id), stored.task);
});

test('message/stream: task, working, the artifact, completed (final), as memd stores them', async () => {
  const events = await readAll(
    server.client.sendMessageStream({ message: userMessage('run streamed words') })[Symbol.asyncIterator](),
    'end of the stream',
  );
  assert.deepEqual(shape(events), ['task:submitted', 'status-update:working', 'artifact-update', 'status-update:completed:final']);
  const artifact = events[2] as TaskArtifactUpdateEvent;
  assert.equal(artifact.artifact.parts[0].kind === 'text' && artifact.artifact.parts[0].text, 'STREAMED WORDS');
  const stored = await memdTask((events[0] as Task).id);
  assert.equal(stored.task.status.state, 'completed');
  assert.equal(resultText(stored.task as Task), 'STREAMED WORDS');
  // The user's message, then the agent's working and completed messages.
  assert.deepEqual(stored.task.history.map((m: Message) => m.role), ['user', 'agent', 'agent']);
});

test('tasks/cancel: a running task ends canceled (final) in the stream and in memd', async () => {
  const it = server.client.sendMessageStream({ message: userMessage('hold never finished') })[Symbol.asyncIterator]();
  const start = await readUntil(it, 'the held task working', (e) => e.kind === 'status-update' && e.status.state === 'working');
  const taskId = (start[0] as Task).id;
  assert.equal((await memdTask(taskId)).task.status.state, 'working');
  const canceled = await within('tasks/cancel', server.client.cancelTask({ id: taskId }));
  assert.equal(canceled.status.state, 'canceled');
  const rest = await readAll(it, 'end of the canceled stream');
  assert.deepEqual(shape(rest), ['status-update:canceled:final']);
  assert.equal((await memdTask(taskId)).task.status.state, 'canceled');
  // A canceled task is final: canceling it again is refused.
  await assert.rejects(server.client.cancelTask({ id: taskId }), TaskNotCancelableError);
});

test('tasks/get with historyLength: the most recent messages, as memd gives them', async () => {
  const sent = await server.client.sendMessage({ message: userMessage('run some history') }) as Task;
  const full = (await memdTask(sent.id)).task as Task;
  assert.equal(full.history?.length, 3);
  const two = await server.client.getTask({ id: sent.id, historyLength: 2 });
  assert.deepEqual(two.history, full.history!.slice(-2));
  assert.deepEqual((await memdTask(sent.id, 2)).task.history, two.history);
  const one = await server.client.getTask({ id: sent.id, historyLength: 1 });
  assert.deepEqual(one.history?.map((m) => m.parts[0].kind === 'text' && m.parts[0].text), ['done']);
  assert.equal(one.status.state, 'completed');
  await assert.rejects(server.client.getTask({ id: uuidv7() }), /not found/i);
});

test('tasks/resubscribe after the A2A server process was killed and started again', async () => {
  const first = await startServer();
  const it = first.client.sendMessageStream({ message: userMessage('hold across a restart') })[Symbol.asyncIterator]();
  const start = await readUntil(it, 'the held task working', (e) => e.kind === 'status-update' && e.status.state === 'working');
  const task = start[0] as Task;
  await kill(first);
  await assert.rejects(it.next()); // its stream died with it
  const second = await startServer();
  // The task outlived the process that ran it: memd has it, working.
  const again = await readAll(second.client.resubscribeTask({ id: task.id })[Symbol.asyncIterator](), 'resubscribe');
  assert.deepEqual(shape(again), ['task:working']);
  const resumed = again[0] as Task;
  assert.equal(resumed.contextId, task.contextId);
  assert.deepEqual(resumed.history?.map((m) => m.parts[0].kind === 'text' && m.parts[0].text),
    ['hold across a restart', 'working on hold']);
  // The new process continues the task (a follow-up message it holds), and
  // a client resubscribing meanwhile follows it live to its end.
  const follow = second.client.sendMessageStream({ message: userMessage('hold resumed here', { taskId: task.id }) })[Symbol.asyncIterator]();
  await readUntil(follow, 'the resumed task working', (e) => e.kind === 'status-update' && e.status.state === 'working');
  const live = second.client.resubscribeTask({ id: task.id })[Symbol.asyncIterator]();
  const head = await readUntil(live, 'the resubscribed task', (e) => e.kind === 'task');
  assert.deepEqual(shape(head), ['task:working']);
  await release(second, task.id);
  assert.deepEqual(shape(await readAll(live, 'end of the resubscribed stream')),
    ['artifact-update', 'status-update:completed:final']);
  assert.deepEqual(shape(await readAll(follow, 'end of the follow-up stream')),
    ['artifact-update', 'status-update:completed:final']);
  const done = (await memdTask(task.id)).task as Task;
  assert.equal(done.status.state, 'completed');
  assert.equal(resultText(done), 'RESUMED HERE');
  assert.equal(done.history?.[0].parts[0].kind === 'text' && done.history[0].parts[0].text, 'hold across a restart');
  await kill(second);
});

test("memd's REST view of a context's tasks agrees with tasks/get", async () => {
  const contextId = uuidv7();
  const a = await server.client.sendMessage({ message: userMessage('run first', { contextId }) }) as Task;
  const b = await server.client.sendMessage({ message: userMessage('run second', { contextId }) }) as Task;
  await server.client.sendMessage({ message: userMessage('run elsewhere') });
  const listed = await memd.listTasks({ app: APP, context_id: contextId }) as Json;
  assert.deepEqual(listed.tasks.map((t: Json) => t.task.id).sort(), [a.id, b.id].sort());
  for (const t of listed.tasks) {
    const viaA2A = await server.client.getTask({ id: t.task.id, historyLength: 100 });
    assert.deepEqual(t.task, viaA2A);
  }
});

test('a save that would leave a terminal state is refused and writes nothing', async () => {
  const store = new MemdTaskStore({ client: memd, app: APP });
  const sent = await server.client.sendMessage({ message: userMessage('run finished') }) as Task;
  const task = await store.load(sent.id);
  assert.ok(task);
  const before = await memdTask(sent.id);
  await assert.rejects(
    store.save({ ...task, status: { state: 'working', timestamp: new Date().toISOString() } }),
    (err: unknown) => {
      assert.ok(err instanceof MemdTaskConflictError, String(err));
      assert.equal(err.reason, 'terminal');
      assert.equal(err.storedState, 'completed');
      assert.equal(err.state, 'working');
      assert.match(err.message, /is completed in memd, a terminal state, and cannot become working/);
      assert.match(err.message, /nothing was written/);
      return true;
    },
  );
  assert.deepEqual(await memdTask(sent.id), before);
  // The same terminal state again is no change of state: saved.
  await store.save({ ...task, metadata: { note: 'kept' } });
  assert.deepEqual((await memdTask(sent.id)).task.metadata, { note: 'kept' });
});

test('two stores racing on one task: one wins, the other gets a clear error', async () => {
  const id = uuidv7();
  const contextId = uuidv7();
  const base: Task = { kind: 'task', id, contextId, status: { state: 'submitted' }, history: [] };
  const one = new MemdTaskStore({ client: memd, app: APP });
  const two = new MemdTaskStore({ baseUrl: baseUrl!, app: APP });
  assert.equal(await one.load(id), undefined);
  // Two first saves of one new task: one creates it, the other is refused.
  const created = await Promise.allSettled([
    one.save({ ...base, metadata: { by: 'one' } }), two.save({ ...base, metadata: { by: 'two' } }),
  ]);
  const winner = created.findIndex((r) => r.status === 'fulfilled');
  assert.deepEqual(created.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
  const lost = created[1 - winner] as PromiseRejectedResult;
  assert.ok(lost.reason instanceof MemdTaskConflictError, String(lost.reason));
  assert.equal(lost.reason.reason, 'exists');
  assert.match(lost.reason.message, new RegExp(`task ${id} already exists in memd`));
  assert.deepEqual((await memdTask(id)).task.metadata, { by: winner === 0 ? 'one' : 'two' });
  // Both read it, both update it at once: one update lands, the other is refused.
  const a = (await one.load(id))!;
  const b = (await two.load(id))!;
  const updated = await Promise.allSettled([
    one.save({ ...a, status: { state: 'working' }, metadata: { by: 'one' } }),
    two.save({ ...b, status: { state: 'input-required' }, metadata: { by: 'two' } }),
  ]);
  assert.deepEqual(updated.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
  const w = updated.findIndex((r) => r.status === 'fulfilled');
  const refused = (updated[1 - w] as PromiseRejectedResult).reason;
  assert.ok(refused instanceof MemdTaskConflictError, String(refused));
  assert.equal(refused.reason, 'concurrent');
  assert.match(refused.message, /was updated by another writer since this store read it/);
  const stored = await memdTask(id);
  assert.deepEqual(stored.task.metadata, { by: w === 0 ? 'one' : 'two' });
  // The loser's later saves keep failing until it reads the task again.
  const loser = w === 0 ? two : one;
  await assert.rejects(loser.save({ ...b, status: { state: 'failed' } }), MemdTaskConflictError);
  const fresh = (await loser.load(id))!;
  await loser.save({ ...fresh, status: { state: 'failed' } });
  assert.equal((await memdTask(id)).task.status.state, 'failed');
});

test("one store's saves of one task run one at a time, in the order they were called", async () => {
  // As the SDK's handler does when a stream and a cancel of one task both
  // save it: neither is refused, the later call's task is the one kept.
  const store = new MemdTaskStore({ client: memd, app: APP });
  const id = uuidv7();
  const task: Task = { kind: 'task', id, contextId: uuidv7(), status: { state: 'submitted' } };
  const states = ['working', 'input-required', 'working', 'completed'] as const;
  await Promise.all([store.save(task), ...states.map((state) => store.save({ ...task, status: { state } }))]);
  const stored = await memdTask(id);
  assert.equal(stored.task.status.state, 'completed');
  assert.equal(stored.version, 1 + states.length);
});

test('two A2A servers on one task: a cancel through one, the other cannot complete it over it', async () => {
  const runner = await startServer();
  const it = runner.client.sendMessageStream({ message: userMessage('hold the line') })[Symbol.asyncIterator]();
  const start = await readUntil(it, 'the held task working', (e) => e.kind === 'status-update' && e.status.state === 'working');
  const taskId = (start[0] as Task).id;
  // The other server does not run the task: it cancels it in memd.
  const canceled = await server.client.cancelTask({ id: taskId });
  assert.equal(canceled.status.state, 'canceled');
  // The runner finishes its work; its save is refused, and its client told why.
  await release(runner, taskId);
  await assert.rejects(readAll(it, 'the refused stream'), /is canceled in memd, a terminal state, and cannot become working/);
  const stored = await memdTask(taskId);
  assert.equal(stored.task.status.state, 'canceled');
  assert.equal(resultText(stored.task as Task), undefined);
  await kill(runner);
});

test('MemdRequestHandler: a save refused during a blocking message/send fails that request', async () => {
  const runner = await startServer('memd');
  const contextId = uuidv7();
  const sent = runner.client.sendMessage({ message: userMessage('hold blocking', { contextId }) });
  sent.catch(() => undefined); // awaited below
  // The task's id, once the runner has saved it working (bounded).
  const deadline = Date.now() + WAIT_MS;
  let taskId: string | undefined;
  while (!taskId) {
    const page = await memd.listTasks({ app: APP, context_id: contextId, state: 'working' });
    taskId = page.tasks[0]?.task.id;
    if (!taskId) {
      assert.ok(Date.now() < deadline, `no working task in context ${contextId} within ${WAIT_MS} ms`);
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  assert.equal((await server.client.cancelTask({ id: taskId })).status.state, 'canceled');
  await release(runner, taskId);
  await assert.rejects(within('the blocking send', sent),
    /is canceled in memd, a terminal state, and cannot become working: the save was refused/);
  assert.equal((await memdTask(taskId)).task.status.state, 'canceled');
  // The runner lives on and serves the next request.
  assert.equal(runner.child.exitCode, null);
  const next = await runner.client.sendMessage({ message: userMessage('run still here') }) as Task;
  assert.equal(resultText(next), 'STILL HERE');
  await kill(runner);
});

test("with user, a task belongs to the user's session named by its contextId", async () => {
  const user = `u-${uuidv7()}`;
  const contextId = uuidv7();
  await memd.createSession({ app: APP, user }, { id: contextId });
  const store = new MemdTaskStore({ client: memd, app: APP, user });
  const task: Task = { kind: 'task', id: uuidv7(), contextId, status: { state: 'working' } };
  await store.save(task);
  assert.equal((await memdTask(task.id)).user, user);
  assert.deepEqual((await store.load(task.id))?.status, task.status);
  // Deleting the session deletes its tasks.
  await memd.deleteSession({ app: APP, user, sid: contextId });
  assert.equal(await store.load(task.id), undefined);
});

test('load of a task memd does not have is undefined; other failures throw', async () => {
  const store = new MemdTaskStore({ client: memd, app: APP });
  assert.equal(await store.load(uuidv7()), undefined);
  const down = new MemdTaskStore({ client: new MemdClient({ baseUrl: 'http://127.0.0.1:1', retries: 0 }), app: APP });
  await assert.rejects(down.load('x'), (err: unknown) => err instanceof MemdError && err.code === 'network');
  assert.throws(() => new MemdTaskStore({ app: '' } as never), /app is required/);
});

test.after(async () => {
  if (server) await kill(server);
});
