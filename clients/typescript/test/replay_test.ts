// SPDX-License-Identifier: MIT
// Retries after a lost answer against a real memd, and memd's errors as
// MemdError. A lost answer is made by a fetch wrapper that performs the
// request (memd does the work and answers) and then throws as a dropped
// connection would: the client's retry must be a replay that memd stores
// once.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemdError } from '../src/index.js';
import { client, fresh } from './helpers.js';

/**
 * A fetch that loses the answer of the first `lose` requests whose
 * method is `method`: it sends each (memd answers; the answer is read
 * whole) and then throws a TypeError as undici does for a connection
 * closed under it. `lost` counts them.
 */
function losing(method: string, lose = 1) {
  const state = { lost: 0, sent: 0 };
  const f: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if ((init?.method ?? 'GET') !== method) return res;
    state.sent++;
    if (state.lost < lose) {
      await res.arrayBuffer();
      state.lost++;
      throw new TypeError('fetch failed (the answer was lost on the way back)');
    }
    return res;
  };
  return { fetch: f, state };
}

function isError(code: string, status: number) {
  return (e: unknown) => {
    assert.ok(e instanceof MemdError, `not a MemdError: ${String(e)}`);
    assert.equal(e.code, code);
    assert.equal(e.status, status);
    assert.equal(typeof e.message, 'string');
    assert.match(e.requestId ?? '', /^[A-Za-z0-9._:-]{1,128}$/);
    return true;
  };
}

test('appendEvents after a lost answer: the retry is a replay, the events are stored once', async () => {
  const app = fresh('app');
  const user = 'u';
  await client().createSession({ app, user }, { id: 's' });
  const lossy = losing('POST');
  const memd = client({ fetch: lossy.fetch, retryBaseMs: 1, retryMaxMs: 1 });
  const r = await memd.appendEvents({ app, user, sid: 's' }, {
    events: [{ role: 'user', content: 'one' }, { role: 'assistant', content: 'two' }],
    state_delta: { counter: 1 },
  });
  assert.equal(lossy.state.lost, 1);
  assert.equal(lossy.state.sent, 2);
  assert.equal(r.replayed, true);
  assert.deepEqual(r.seqs, [1, 2]);
  const events = await client().listEvents({ app, user, sid: 's' });
  assert.deepEqual(events.events.map((e) => e.content), [
    { parts: [{ text: 'one' }] }, { parts: [{ text: 'two' }] }]);
  assert.equal((await client().getSession({ app, user, sid: 's' })).version, r.version);
});

test('appendMessages after a lost answer: the retry is a replay, the messages are stored once', async () => {
  const app = fresh('app');
  const user = 'u';
  await client().createSession({ app, user }, { id: 's' });
  const lossy = losing('POST');
  const memd = client({ fetch: lossy.fetch, retryBaseMs: 1, retryMaxMs: 1 });
  await memd.appendMessages({ app, user, sid: 's' }, {
    messages: [{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi' }],
  });
  assert.equal(lossy.state.sent, 2);
  const got = await client().getMessages({ app, user, sid: 's' });
  assert.deepEqual(got.messages.map((m) => [m.role, m.content]), [['user', 'hello'], ['assistant', 'hi']]);
});

test('createSession after a lost answer: the 409 of the retry is resolved by reading the session back', async () => {
  const app = fresh('app');
  const user = 'u';
  const lossy = losing('POST');
  const memd = client({ fetch: lossy.fetch, retryBaseMs: 1, retryMaxMs: 1 });
  const s = await memd.createSession({ app, user }, { title: 'trip', state: { k: 'v' } });
  assert.equal(lossy.state.sent, 2);
  assert.match(s.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7/);
  assert.equal(s.title, 'trip');
  const all = await client().listSessions({ app, user });
  assert.deepEqual(all.sessions.map((x) => x.id), [s.id]);
});

test('createSession without a lost answer: an existing id is MemdError conflict', async () => {
  const app = fresh('app');
  await client().createSession({ app, user: 'u' }, { id: 'dup' });
  await assert.rejects(client().createSession({ app, user: 'u' }, { id: 'dup' }), isError('conflict', 409));
});

test('createMemory after a lost answer: the retry answers the stored memory, stored once', async () => {
  const app = fresh('app');
  const user = 'u';
  const lossy = losing('POST');
  const memd = client({ fetch: lossy.fetch, retryBaseMs: 1, retryMaxMs: 1 });
  const m = await memd.createMemory({ app, user }, { text: 'prefers window seats', kind: 'preference' });
  assert.equal(lossy.state.sent, 2);
  assert.equal(m.text, 'prefers window seats');
  const all = await client().listMemories({ app, user });
  assert.deepEqual(all.memories.map((x) => x.id), [m.id]);
});

test('putCheckpoint after a lost answer: the retry saves the same checkpoint again, stored once', async () => {
  const app = fresh('app');
  const user = 'u';
  const lossy = losing('PUT');
  const memd = client({ fetch: lossy.fetch, retryBaseMs: 1, retryMaxMs: 1 });
  const put = await memd.putCheckpoint({ app, user, sid: 't', cid: '0001' },
    { type: 'json', checkpoint: 'e30=', metadata: { step: 1 } });
  assert.equal(lossy.state.lost, 1);
  assert.equal(lossy.state.sent, 2);
  assert.equal(put.checkpoint_id, '0001');
  const all = await client().listCheckpoints({ app, user });
  assert.deepEqual(all.checkpoints.map((c) => c.checkpoint_id), ['0001']);
  assert.equal(all.checkpoints[0]?.created, put.created);
});

test('deleteSession after a lost answer: the retry\'s 404 means the lost attempt deleted it', async () => {
  const app = fresh('app');
  const user = 'u';
  await client().createSession({ app, user }, { id: 's' });
  const lossy = losing('DELETE');
  const memd = client({ fetch: lossy.fetch, retryBaseMs: 1, retryMaxMs: 1 });
  assert.equal(await memd.deleteSession({ app, user, sid: 's' }), undefined);
  assert.equal(lossy.state.sent, 2);
  /* Without a lost answer, a 404 is still an error. */
  await assert.rejects(client().deleteSession({ app, user, sid: 's' }), isError('not_found', 404));
});

test('search after a lost answer is asked again (a read-only POST)', async () => {
  const app = fresh('app');
  const user = 'u';
  const lossy = losing('POST');
  const memd = client({ fetch: lossy.fetch, retryBaseMs: 1, retryMaxMs: 1 });
  const r = await memd.search({ app, user }, { query: 'lighthouse' });
  assert.equal(lossy.state.sent, 2);
  assert.deepEqual(r.results, []);
});

test('a write that is not idempotent is not repeated after a lost answer', async () => {
  const app = fresh('app');
  const user = 'u';
  await client().createSession({ app, user }, { id: 's' });
  const lossy = losing('PATCH');
  const memd = client({ fetch: lossy.fetch, retryBaseMs: 1, retryMaxMs: 1 });
  await assert.rejects(memd.patchState({ app, user, sid: 's' }, { n: 1 }), (e: unknown) => {
    assert.ok(e instanceof MemdError);
    assert.equal(e.code, 'network');
    assert.equal(e.status, 0);
    return true;
  });
  assert.equal(lossy.state.sent, 1);
  /* It was done once: one state change in the history. */
  const history = await client().getStateHistory({ app, user, sid: 's' });
  assert.equal(history.changes.length, 1);
});

test('a 409 on expected_version: MemdError conflict with status, requestId and memd\'s body', async () => {
  const app = fresh('app');
  const user = 'u';
  const memd = client();
  const s = await memd.createSession({ app, user }, { id: 's' });
  await memd.appendEvents({ app, user, sid: 's' }, { events: [{ role: 'user', content: 'a' }], expected_version: s.version });
  await assert.rejects(
    memd.appendEvents({ app, user, sid: 's' }, { events: [{ role: 'user', content: 'b' }], expected_version: s.version },
      { headers: { 'X-Request-Id': 'conflict-test.1' } }),
    (e: unknown) => {
      isError('conflict', 409)(e);
      const err = e as MemdError;
      assert.equal(err.requestId, 'conflict-test.1');
      assert.equal(err.retryable, false);
      assert.equal((err.body as { error: { code: string } }).error.code, 'conflict');
      return true;
    });
  /* Nothing was written. */
  assert.equal((await memd.listEvents({ app, user, sid: 's' })).events.length, 1);
});

test('typed errors: 404 not_found, 400 invalid_request', async () => {
  const memd = client();
  const app = fresh('app');
  await assert.rejects(memd.getSession({ app, user: 'u', sid: 'nope' }), isError('not_found', 404));
  await assert.rejects(memd.getMemory({ app, user: 'u', mid: 'nope' }), isError('not_found', 404));
  await assert.rejects(memd.getArtifact({ app, user: 'u', sid: 'nope', name: 'a.txt' }), isError('not_found', 404));
  await assert.rejects(memd.listSessions({ app, user: 'u', limit: 5000 }), isError('invalid_request', 400));
  await assert.rejects(memd.search({ app, user: 'u' }, { query: '' }), isError('invalid_request', 400));
  /* Never a bare TypeError: a refused connection is MemdError network. */
  const nowhere = client({ baseUrl: 'http://127.0.0.1:1', retries: 0 });
  await assert.rejects(nowhere.healthz(), isError('network', 0));
});
