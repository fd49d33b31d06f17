// SPDX-License-Identifier: MIT
// A real LangGraph StateGraph on MemdSaver across processes, against a
// real memd serve: a run stops at its interrupt() in one process, memd
// lists it as waiting for approval, a second process resumes it with
// Command({resume}); a run killed with SIGKILL in the middle of a step is
// listed to resume automatically and a new process finishes it with the
// state an uninterrupted run ends with; finish() takes a run off the
// listing.
// Usage: MEMD_URL=... node --test graph_test.js (tests/clients/langgraph_test.sh runs it).

import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { MemdClient, uuidv7, type Schemas } from '../../src/index.js';
import { MemdSaver } from '../../src/langgraph.js';

const baseUrl = process.env.MEMD_URL;
if (!baseUrl) throw new Error('MEMD_URL is not set: run tests/clients/langgraph_test.sh');
const client = new MemdClient({ baseUrl });
const APP = `lg-${uuidv7()}`;
const USER = 'alice';
const saver = new MemdSaver({ client, app: APP, user: USER });
const runJs = path.join(path.dirname(fileURLToPath(import.meta.url)), 'run.js');

/* How long a test waits for memd to show what a child process did. */
const WAIT_MS = 60_000;
/* The pause between two looks at memd while waiting. */
const POLL_MS = 25;

/** A child process running run.js with args; `done` is its stdout (the
 * final state) once it exited, or its failure. */
function run(...args: string[]): { child: ChildProcess; done: Promise<{ out: string; code: number | null; signal: string | null }> } {
  const child = spawn(process.execPath, [runJs, baseUrl!, APP, USER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => { out += d; });
  child.stderr!.on('data', (d) => { err += d; });
  const done = new Promise<{ out: string; code: number | null; signal: string | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      if (code !== 0 && signal === null) process.stderr.write(`run.js ${args.join(' ')}: exit ${code}\n${err}`);
      resolve({ out, code, signal });
    });
  });
  return { child, done };
}

/** The final state a run.js printed; fails unless it exited 0. */
async function finalState(p: ReturnType<typeof run>): Promise<Record<string, unknown>> {
  const { out, code } = await p.done;
  assert.equal(code, 0, 'run.js exits 0');
  return JSON.parse(out) as Record<string, unknown>;
}

/** f's first defined answer, looking again every POLL_MS, for at most WAIT_MS. */
async function until<T>(what: string, f: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`waited ${WAIT_MS} ms for ${what}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** The thread's entry in memd's resumable listing of the app, if any. */
async function resumable(thread: string): Promise<Schemas['ResumableRun'] | undefined> {
  let cursor: string | undefined;
  do {
    const page = await client.listResumableRuns({ app: APP, limit: 100, cursor });
    const hit = page.sessions.find((s) => s.user === USER && s.session_id === thread);
    if (hit) return hit;
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  return undefined;
}

test('a run stopped at interrupt() waits for approval and resumes in another process', async () => {
  const thread = `approval-${uuidv7()}`;
  const first = run(thread, 'approval', 'start');
  const waiting = await until('the run to reach its interrupt', async () => {
    const r = await resumable(thread);
    return r?.run_state === 'interrupted' ? r : undefined;
  });
  assert.equal(waiting.resume, 'approval');
  await finalState(first);
  const interrupted = await saver.getTuple({ configurable: { thread_id: thread } });
  assert.deepEqual(interrupted?.checkpoint.channel_values.log, ['plan']);
  assert.ok(interrupted?.pendingWrites?.some(([, channel]) => channel === '__interrupt__'));

  const state = await finalState(run(thread, 'approval', 'resume', 'yes'));
  assert.deepEqual(state.log, ['plan', 'answer:yes', 'act']);
  assert.equal(state.n, 3);
  const after = await resumable(thread);
  assert.equal(after?.run_state, 'running', 'a resumed run is running again until finish()');
  assert.equal(after?.resume, 'automatic');

  await saver.finish({ configurable: { thread_id: thread } });
  assert.equal(await resumable(thread), undefined, 'finish() takes the run off the listing');
});

test('a run killed in a step is listed to resume automatically and finishes in a new process', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memd-lg-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const go = path.join(dir, 'go');
  const thread = `killed-${uuidv7()}`;

  const first = run(thread, 'waiting', 'start', go);
  // The checkpoint whose next step is `wait` (the state after `two`) is in
  // memd; the process is in `wait`, which goes on only once `go` exists.
  const before = await until('the checkpoint before the waiting step', async () => {
    const tuple = await saver.getTuple({ configurable: { thread_id: thread } });
    const log = tuple?.checkpoint.channel_values.log as string[] | undefined;
    return log && log.includes('two') ? tuple : undefined;
  });
  assert.deepEqual(before.checkpoint.channel_values.log, ['one', 'two']);
  assert.equal(first.child.kill('SIGKILL'), true);
  const killed = await first.done;
  assert.equal(killed.signal, 'SIGKILL');

  const listed = await resumable(thread);
  assert.equal(listed?.run_state, 'running');
  assert.equal(listed?.resume, 'automatic');
  assert.equal(listed?.checkpoint_id, before.config.configurable?.checkpoint_id);

  fs.writeFileSync(go, '');
  const resumed = await finalState(run(thread, 'waiting', 'continue', go));
  const reference = await finalState(run(`reference-${uuidv7()}`, 'waiting', 'start', go));
  assert.deepEqual(resumed, reference);
  assert.deepEqual(resumed.log, ['one', 'two', 'wait', 'three']);
  assert.equal(resumed.n, 4);

  await saver.finish({ configurable: { thread_id: thread } });
  assert.equal(await resumable(thread), undefined, 'finish() takes the run off the listing');
});
