// SPDX-License-Identifier: MIT
// Sessions, events and state against a real memd: round trips through the
// typed methods.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemdError } from '../src/index.js';
import { client, fresh } from './helpers.js';

test('health, create, append, read back, state, delete', async () => {
  const memd = client();
  assert.equal((await memd.healthz()).status, 'ok');
  const app = fresh('app');
  const user = 'alice';
  const s = await memd.createSession({ app, user }, { id: 's1', state: { mood: 'calm' } });
  assert.equal(s.id, 's1');
  const r = await memd.appendEvents({ app, user, sid: 's1' }, {
    events: [{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi there' }],
    state_delta: { 'user:name': 'Alice' },
  });
  assert.deepEqual(r.seqs, [1, 2]);
  assert.equal(r.replayed, false);
  const got = await memd.getSession({ app, user, sid: 's1', events: 10 });
  assert.equal(got.events?.length, 2);
  assert.equal(got.version, r.version);
  const state = await memd.getState({ app, user, sid: 's1' });
  assert.equal((state as Record<string, unknown>)['user:name'], 'Alice');
  assert.equal(await memd.deleteSession({ app, user, sid: 's1' }), undefined);
  await assert.rejects(memd.getSession({ app, user, sid: 's1' }), (e: unknown) =>
    e instanceof MemdError && e.status === 404 && e.code === 'not_found');
});
