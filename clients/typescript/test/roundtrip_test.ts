// SPDX-License-Identifier: MIT
// Round trips through every part of memd's API with the typed methods,
// against a real memd: sessions, events, state, context, transcripts,
// artifacts (bytes in and out), search, memories, A2A tasks, jobs, lanes
// (turns and the inbox) and the service routes.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemdError, type Schemas } from '../src/index.js';
import { client, fresh } from './helpers.js';

const memd = client();

function rejectsWith(code: string, status: number) {
  return (e: unknown) => e instanceof MemdError && e.code === code && e.status === status;
}

test('service: healthz, readyz, openapi, metrics, listPlugins', async () => {
  assert.equal((await memd.healthz()).status, 'ok');
  assert.equal((await memd.readyz()).status, 'ready');
  const doc = await memd.openapi();
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.info.title, 'memd REST API');
  const metrics = await memd.metrics();
  assert.equal(typeof metrics, 'string');
  assert.match(metrics, /^memd_build_info\{/m);
  const plugins = await memd.listPlugins();
  assert.ok(plugins.plugins.some((p) => p.name === 'sqlite'));
});

test('one round trip per step: return: context answers the append and the context right after it', async () => {
  const app = fresh('app');
  const user = 'u';
  const sid = 's';
  await memd.createSession({ app, user }, { id: sid });
  const step = await memd.appendMessages({ app, user, sid, return: 'context', format: 'openai' }, {
    messages: [{ role: 'user', content: 'Hi?' }],
  });
  assert.deepEqual(step.seqs, [1]);
  assert.equal(step.replayed, false);
  assert.deepEqual(step.context?.messages, [{ role: 'user', content: 'Hi?' }]);
  await memd.appendMessages({ app, user, sid }, { messages: [{ role: 'assistant', content: 'Hello.' }] });
  const native = await memd.appendEvents({ app, user, sid, return: 'context', include_text: true }, {
    events: [{ role: 'user', content: 'Bye.' }],
  });
  assert.deepEqual(native.context?.events.map((e) => e.text), ['Hi?', 'Hello.', 'Bye.']);
  const plain = await memd.appendEvents({ app, user, sid }, { events: [{ role: 'assistant', content: 'Bye.' }] });
  assert.equal('context' in plain, false);
  const opened = await memd.openLane({ app, user, key: 'dm', return: 'context' });
  assert.deepEqual(opened.context?.events, []);
  const bySource = await memd.openLaneBySource({ app, return: 'context', format: 'openai' }, {
    platform: 'slack', chat_id: 'c1', user_id: user,
  });
  assert.deepEqual(bySource.context?.messages, []);
});

test('sessions: create, list, patch, delete; deleteUser forgets the user', async () => {
  const app = fresh('app');
  const user = 'u';
  const s = await memd.createSession({ app, user }, { id: 'chat', title: 'Lisbon', metadata: { channel: 'web' } });
  assert.equal(s.title, 'Lisbon');
  const p = await memd.patchSession({ app, user, sid: 'chat' }, { title: 'Lisbon trip', archived: true });
  assert.equal(p.title, 'Lisbon trip');
  assert.equal(p.archived, true);
  assert.deepEqual((await memd.listSessions({ app, user })).sessions, []);
  assert.deepEqual((await memd.listSessions({ app, user, archived: true })).sessions.map((x) => x.id), ['chat']);
  await memd.createSession({ app, user }); /* no body: memd's id */
  assert.equal(await memd.deleteUser({ app, user }), undefined);
  assert.deepEqual((await memd.listSessions({ app, user, archived: true })).sessions, []);
});

test('events and state: append with a state delta, read, clear, rewind, undo, history', async () => {
  const app = fresh('app');
  const user = 'u';
  const sid = 's';
  await memd.createSession({ app, user }, { id: sid, state: { 'user:lang': 'pt' } });
  const a = await memd.appendEvents({ app, user, sid }, {
    events: [
      { role: 'user', content: 'Plan a trip to Lisbon', author: 'user' },
      { role: 'assistant', content: { parts: [{ text: 'Sure: three days.' }] }, author: 'agent' },
    ],
    state_delta: { city: 'Lisbon', 'temp:scratch': 1 },
    invocation_id: 'inv1',
  });
  assert.deepEqual(a.seqs, [1, 2]);
  const state = await memd.getState({ app, user, sid });
  assert.equal(state.city, 'Lisbon');
  assert.equal(state['user:lang'], 'pt');
  await memd.endInvocation({ app, user, sid, invocation: 'inv1' });
  assert.equal((await memd.getState({ app, user, sid }))['temp:scratch'], undefined);
  const patched = await memd.patchState({ app, user, sid }, { city: null, days: 3 });
  assert.equal(patched.days, 3);
  assert.equal(patched.city, undefined);
  const history = await memd.getStateHistory({ app, user, sid });
  assert.deepEqual(history.changes.filter((c) => c.key === 'city').map((c) => c.new), ['Lisbon', null]);

  const page = await memd.listEvents({ app, user, sid, include_text: true, roles: 'assistant' });
  assert.deepEqual(page.events.map((e) => e.text), ['Sure: three days.']);
  assert.equal(page.next_after_seq, null);
  const withEvents = await memd.getSession({ app, user, sid, events: 1 });
  assert.deepEqual(withEvents.events?.map((e) => e.seq), [2]);

  const rewound = await memd.rewindSession({ app, user, sid }, { turns: 1 });
  assert.equal(rewound.target_text, 'Plan a trip to Lisbon');
  assert.equal((await memd.listEvents({ app, user, sid })).events.length, 0);
  const ops = await memd.listOperations({ app, user, sid });
  assert.deepEqual(ops.operations.map((o) => o.kind), ['rewind']);
  const undone = await memd.undoOperation({ app, user, sid, op: rewound.operation.id });
  assert.equal(undone.unhidden_count, 2);
  const cleared = await memd.clearEvents({ app, user, sid, expected_version: undone.version });
  assert.equal(cleared.hidden_count, 2);
  const hidden = await memd.listEvents({ app, user, sid, include_hidden: true });
  assert.equal(hidden.events.length, 2);
});

test('context: memd\'s events and the OpenAI format', async () => {
  const app = fresh('app');
  const user = 'u';
  const sid = 's';
  await memd.createSession({ app, user }, { id: sid });
  await memd.appendEvents({ app, user, sid }, {
    events: [{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi, how can I help?' }],
  });
  const ctx = await memd.getContext({ app, user, sid });
  assert.ok('events' in ctx);
  assert.equal(ctx.events.length, 2);
  const openai = await memd.getContext({ app, user, sid, format: 'openai' });
  assert.ok('messages' in openai);
  assert.deepEqual(openai.messages.map((m) => [m.role, m.content]), [['user', 'hello'], ['assistant', 'hi, how can I help?']]);
});

test('transcripts: replace and read OpenAI messages', async () => {
  const app = fresh('app');
  const user = 'u';
  const sid = 's';
  const put = await memd.replaceMessages({ app, user, sid }, {
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: '4' },
    ],
  });
  assert.equal(put.created, true);
  const got = await memd.getMessages({ app, user, sid });
  assert.equal(got.format, 'openai');
  assert.deepEqual(got.messages.map((m) => m.content), ['Be brief.', 'What is 2+2?', '4']);
});

test('artifacts: bytes, strings and Blobs in; bytes, media type and version out', async () => {
  const app = fresh('app');
  const user = 'u';
  const sid = 's';
  await memd.createSession({ app, user }, { id: sid });
  const bytes = new Uint8Array(256).map((_, i) => i);
  const v1 = await memd.putArtifact({ app, user, sid, name: 'blob.bin' }, bytes);
  assert.equal(v1.version, 1);
  assert.equal(v1.mime_type, 'application/octet-stream');
  assert.equal(v1.size, 256);
  const v2 = await memd.putArtifact({ app, user, sid, name: 'blob.bin' }, bytes.buffer.slice(0, 10), { contentType: 'image/png' });
  assert.equal(v2.version, 2);
  const text = await memd.putArtifact({ app, user, sid, name: 'notes a+b ü.txt' }, 'olá, Lisboa');
  assert.equal(text.mime_type, 'text/plain; charset=utf-8');
  await memd.putArtifact({ app, user, sid, name: 'data.json' }, new Blob(['{"a":1}'], { type: 'application/json' }));

  const latest = await memd.getArtifact({ app, user, sid, name: 'blob.bin' });
  assert.equal(latest.version, 2);
  assert.equal(latest.contentType, 'image/png');
  assert.deepEqual(latest.data, bytes.slice(0, 10));
  assert.ok(!Number.isNaN(Date.parse(latest.created)));
  const first = await memd.getArtifact({ app, user, sid, name: 'blob.bin', version: 1 });
  assert.deepEqual(first.data, bytes);
  const t = await memd.getArtifact({ app, user, sid, name: 'notes a+b ü.txt' });
  assert.equal(new TextDecoder().decode(t.data), 'olá, Lisboa');
  assert.equal((await memd.getArtifact({ app, user, sid, name: 'data.json' })).contentType, 'application/json');

  const list = await memd.listArtifacts({ app, user, sid });
  assert.deepEqual(list.artifacts.map((x) => x.name).sort(), ['blob.bin', 'data.json', 'notes a+b ü.txt']);
  const versions = await memd.listArtifactVersions({ app, user, sid, name: 'blob.bin' });
  assert.deepEqual(versions.versions.map((x) => x.version), [1, 2]);
  await memd.deleteArtifact({ app, user, sid, name: 'blob.bin' });
  await assert.rejects(memd.getArtifact({ app, user, sid, name: 'blob.bin' }), rejectsWith('not_found', 404));
  await assert.rejects(memd.getArtifact({ app, user, sid, name: 'data.json', version: 9 }), rejectsWith('not_found', 404));
});

test('search: events and memories by keyword', async () => {
  const app = fresh('app');
  const user = 'u';
  await memd.createSession({ app, user }, { id: 's' });
  await memd.appendEvents({ app, user, sid: 's' }, {
    events: [{ role: 'user', content: 'I want to visit the tram museum in Lisbon' }, { role: 'user', content: 'unrelated words' }],
  });
  await memd.createMemory({ app, user }, { text: 'Loves trams and old streetcars' });
  const found = await memd.search({ app, user }, { query: 'tram', mode: 'keyword' });
  assert.equal(found.mode, 'keyword');
  const sources = found.results.map((r) => r.source).sort();
  assert.deepEqual(sources, ['event', 'memory']);
  const events = await memd.search({ app, user }, { query: 'tram museum', sources: ['events'], k: 1 });
  assert.equal(events.results.length, 1);
  const hit = events.results[0];
  assert.ok(hit.source === 'event');
  assert.equal((hit as Schemas['SearchEventHit']).seq, 1);
});

test('memories: create, get, update and delete with If-Match, history, extract', async () => {
  const app = fresh('app');
  const user = 'u';
  const m = await memd.createMemory({ app, user }, { text: 'prefers aisle seats', kind: 'preference', topics: ['travel'] });
  assert.equal((await memd.getMemory({ app, user, mid: m.id })).text, 'prefers aisle seats');
  const u = await memd.updateMemory({ app, user, mid: m.id }, { text: 'prefers window seats' }, { ifMatch: m.version });
  assert.equal(u.version, m.version + 1);
  await assert.rejects(memd.updateMemory({ app, user, mid: m.id }, { text: 'x' }, { ifMatch: m.version }),
    rejectsWith('conflict', 409));
  await assert.rejects(memd.deleteMemory({ app, user, mid: m.id }, { ifMatch: m.version }), rejectsWith('conflict', 409));
  assert.equal(await memd.deleteMemory({ app, user, mid: m.id }, { ifMatch: `"${u.version}"` }), undefined);
  const h = await memd.getMemoryHistory({ app, user, mid: m.id });
  assert.deepEqual(h.history.map((c) => c.op), ['add', 'update', 'delete']);
  assert.deepEqual((await memd.listMemories({ app, user, kind: 'preference' })).memories, []);

  await memd.createSession({ app, user }, { id: 's' });
  await memd.appendEvents({ app, user, sid: 's' }, { events: [{ role: 'user', content: 'My name is Ana and I live in Porto.' }] });
  const x = await memd.extractMemories({ app, user, sid: 's' });
  assert.equal(x.session_id, 's');
  assert.equal(x.to_seq, 1);
  const swept = await memd.sweepMemories();
  assert.equal(typeof swept.memories_expired, 'number');
});

test('A2A tasks: save with If-None-Match and If-Match, a terminal state kept, get, list, delete', async () => {
  const app = fresh('app');
  const user = 'u';
  const task = (state: Schemas['TaskState']) => ({
    kind: 'task' as const, id: 't1', contextId: 'ctx1', status: { state },
    history: [
      { kind: 'message' as const, messageId: 'm1', role: 'user' as const, parts: [{ kind: 'text' as const, text: 'hi' }] },
      { kind: 'message' as const, messageId: 'm2', role: 'agent' as const, parts: [{ kind: 'text' as const, text: 'on it' }] },
    ],
  });
  const created = await memd.putTask({ app, tid: 't1', user }, task('submitted'), { ifNoneMatch: '*' });
  assert.equal(created.version, 1);
  assert.equal(created.user, user);
  await assert.rejects(memd.putTask({ app, tid: 't1' }, task('working'), { ifNoneMatch: '*' }), rejectsWith('conflict', 409));
  const working = await memd.putTask({ app, tid: 't1', user }, task('working'), { ifMatch: created.version });
  assert.equal(working.version, 2);
  await assert.rejects(memd.putTask({ app, tid: 't1', user }, task('working'), { ifMatch: 1 }), rejectsWith('conflict', 409));
  await memd.putTask({ app, tid: 't1', user }, task('completed'));
  await assert.rejects(memd.putTask({ app, tid: 't1', user }, task('working')), rejectsWith('conflict', 409));
  const got = await memd.getTask({ app, tid: 't1', history_length: 1 });
  assert.equal(got.task.status.state, 'completed');
  assert.deepEqual(got.task.history?.map((m) => m.messageId), ['m2']);
  await assert.rejects(memd.putTask({ app, tid: 't1' }, { ...task('completed'), id: 'other' }), rejectsWith('invalid_request', 400));
  await memd.putTask({ app, tid: 't2' }, { ...task('working'), id: 't2', contextId: 'ctx2' });
  const page = await memd.listTasks({ app, state: 'completed' });
  assert.deepEqual(page.tasks.map((r) => r.task.id), ['t1']);
  const all: string[] = [];
  for await (const r of memd.tasks({ app, limit: 1 })) all.push(r.task.id);
  assert.deepEqual(all, ['t2', 't1']);
  assert.equal(await memd.deleteTask({ app, tid: 't1' }, { ifMatch: 3 }), undefined);
  await assert.rejects(memd.getTask({ app, tid: 't1' }), rejectsWith('not_found', 404));
});

test('jobs: an index rebuild, its job, the app\'s jobs, cancel', async () => {
  const app = fresh('app');
  const user = 'u';
  await memd.createSession({ app, user }, { id: 's' });
  await memd.appendEvents({ app, user, sid: 's' }, { events: [{ role: 'user', content: 'rebuild me' }] });
  const job = await memd.rebuildIndex({ app, user });
  assert.equal(job.kind, 'index_rebuild');
  assert.deepEqual(job.scope, { app, user });
  assert.equal((await memd.getJob({ app, job: job.id })).id, job.id);
  assert.ok((await memd.listJobs({ app })).jobs.some((j) => j.id === job.id));
  const canceled = await memd.cancelJob({ app, job: job.id });
  assert.equal(canceled.id, job.id);
  await assert.rejects(memd.getJob({ app, job: 'no-such-job' }), rejectsWith('not_found', 404));
});

test('lanes: resolve, open by source, turns, inbox, switch, suspend, reset, delete, sweep', async () => {
  const app = fresh('app');
  const source = { platform: 'telegram', chat_type: 'dm' as const, chat_id: 'c1', user_id: 'tg-42' };
  const resolved = await memd.resolveLane({ app }, source);
  const opened = await memd.openLaneBySource({ app }, source);
  assert.equal(opened.key, resolved.key);
  assert.equal(opened.user, resolved.user);
  assert.equal(opened.created, true);
  const lane = { app, user: opened.user, key: opened.key };
  assert.equal((await memd.getLane(lane)).session_id, opened.session.id);

  const turn = await memd.beginTurn(lane, { lease_ms: 60_000 });
  await assert.rejects(memd.beginTurn(lane), rejectsWith('conflict', 409));
  await memd.heartbeatTurn({ ...lane, turn: turn.turn_id });
  const put = await memd.putInbox(lane, { mode: 'queue', event: { role: 'user', content: 'are you there?' } });
  assert.equal(put.depth, 1);
  assert.equal((await memd.listInbox(lane)).items.length, 1);
  const took = await memd.takeInbox(lane, { turn_id: turn.turn_id });
  assert.equal(took.item?.id, put.id);
  assert.equal(took.depth, 0);
  const ended = await memd.endTurn({ ...lane, turn: turn.turn_id }, { outcome: 'ok' });
  assert.equal(ended.lane.turn, null);

  const other = await memd.createSession({ app, user: opened.user }, { id: 'other' });
  const switched = await memd.switchLane(lane, { session_id: other.id });
  assert.equal(switched.lane.session_id, 'other');
  const suspended = await memd.suspendLane(lane);
  assert.equal(suspended.suspended, true);
  const reset = await memd.resetLane(lane);
  assert.notEqual(reset.session.id, 'other');
  const again = await memd.openLane(lane);
  assert.equal(again.created, false);
  assert.equal(await memd.deleteLane(lane), undefined);
  await assert.rejects(memd.getLane(lane), rejectsWith('not_found', 404));
  const sweep = await memd.sweepLanes();
  assert.equal(typeof sweep.finalized, 'number');
});
