// SPDX-License-Identifier: MIT
// The async iterators against a real memd: with a small page size each
// crosses several page boundaries (the requests are counted) and yields
// every item exactly once, in memd's order.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemdClient } from '../src/index.js';
import { fresh, memdUrl } from './helpers.js';

/* A client that counts its GET requests by path. */
function counting() {
  const gets: string[] = [];
  const memd = new MemdClient({
    baseUrl: memdUrl(),
    fetch: (input, init) => {
      if ((init?.method ?? 'GET') === 'GET') gets.push(new URL(String(input)).pathname);
      return fetch(input, init);
    },
  });
  return { memd, gets };
}

async function all<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

test('sessions: every session once, newest first, across pages', async () => {
  const { memd, gets } = counting();
  const app = fresh('app');
  const user = 'u';
  const made: string[] = [];
  for (let i = 0; i < 7; i++) made.push((await memd.createSession({ app, user }, { id: `s${i}` })).id);
  const got = await all(memd.sessions({ app, user, limit: 2 }));
  assert.equal(gets.length, 4); /* 2 + 2 + 2 + 1 */
  assert.deepEqual(new Set(got.map((s) => s.id)), new Set(made));
  /* memd's order: that of one page holding them all. */
  const one = await memd.listSessions({ app, user, limit: 1000 });
  assert.deepEqual(got.map((s) => s.id), one.sessions.map((s) => s.id));
});

test('events: every event once, in seq order, across pages, from after_seq', async () => {
  const { memd, gets } = counting();
  const app = fresh('app');
  const user = 'u';
  await memd.createSession({ app, user }, { id: 's' });
  await memd.appendEvents({ app, user, sid: 's' }, {
    events: Array.from({ length: 9 }, (_, i) => ({ role: 'user' as const, content: `m${i + 1}` })),
  });
  const got = await all(memd.events({ app, user, sid: 's', limit: 2 }));
  assert.deepEqual(got.map((e) => e.seq), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.ok(gets.length >= 5, `${gets.length} pages`);
  const tail = await all(memd.events({ app, user, sid: 's', limit: 3, after_seq: 4 }));
  assert.deepEqual(tail.map((e) => e.seq), [5, 6, 7, 8, 9]);
});

test('memories: every memory once, across pages', async () => {
  const { memd, gets } = counting();
  const app = fresh('app');
  const user = 'u';
  const made = new Set<string>();
  for (let i = 0; i < 5; i++) made.add((await memd.createMemory({ app, user }, { text: `fact number ${i}` })).id);
  const got = await all(memd.memories({ app, user, limit: 2 }));
  assert.equal(got.length, 5);
  assert.deepEqual(new Set(got.map((m) => m.id)), made);
  assert.equal(gets.length, 3);
});

test('lanes and appLanes: every lane once, across pages', async () => {
  const { memd, gets } = counting();
  const app = fresh('app');
  const keys = new Set<string>();
  for (let i = 0; i < 5; i++) {
    await memd.openLane({ app, user: 'alice', key: `alice-${i}` });
    keys.add(`alice-${i}`);
  }
  for (let i = 0; i < 2; i++) await memd.openLane({ app, user: 'bob', key: `bob-${i}` });
  const mine = await all(memd.lanes({ app, user: 'alice', limit: 2 }));
  assert.equal(mine.length, 5);
  assert.deepEqual(new Set(mine.map((l) => l.key)), keys);
  assert.equal(gets.length, 3);
  gets.length = 0;
  const every = await all(memd.appLanes({ app, limit: 3 }));
  assert.equal(every.length, 7);
  assert.equal(new Set(every.map((l) => `${l.user}/${l.key}`)).size, 7);
  assert.equal(gets.length, 3);
});

test('an iterator can be left early and run again from the start', async () => {
  const { memd } = counting();
  const app = fresh('app');
  for (let i = 0; i < 3; i++) await memd.createSession({ app, user: 'u' }, { id: `s${i}` });
  const it = memd.sessions({ app, user: 'u', limit: 1 });
  let first = '';
  for await (const s of it) {
    first = s.id;
    break;
  }
  const again = await all(it);
  assert.equal(again.length, 3);
  assert.equal(again[0].id, first);
});
