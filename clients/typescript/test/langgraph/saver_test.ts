// SPDX-License-Identifier: MIT
// What MemdSaver stores in memd, read back through memd's REST API: a
// checkpoint holds the values of the channels that changed in its step and
// refers to the ancestor holding the others, unless that one is older than
// reanchorMs; the run state follows interrupt and resume writes; pending
// writes keep their task path and come back in LangGraph's order.
// Usage: MEMD_URL=... node --test saver_test.js (tests/clients/langgraph_test.sh runs it).

import test from 'node:test';
import assert from 'node:assert/strict';
import {
  ERROR, WRITES_IDX_MAP, compareWritesSortKeys, emptyCheckpoint, uuid6, writesSortKey,
  type Checkpoint, type CheckpointPendingWrite, type CheckpointTuple, type PendingWrite,
} from '@langchain/langgraph-checkpoint';
import { MemdClient, uuidv7 } from '../../src/index.js';
import { MemdSaver } from '../../src/langgraph.js';

const baseUrl = process.env.MEMD_URL;
if (!baseUrl) throw new Error('MEMD_URL is not set: run tests/clients/langgraph_test.sh');
const client = new MemdClient({ baseUrl });
const APP = `lg-saver-${uuidv7()}`;
const USER = 'bob';

/** The payload memd keeps for a checkpoint, decoded (the JSON serializer's bytes). */
async function stored(thread: string, id: string): Promise<{ checkpoint: Checkpoint; carried: Record<string, [string, string]> }> {
  const t = await client.getCheckpoint({ app: APP, user: USER, sid: thread, cid: id });
  assert.equal(t.type, 'json');
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(t.checkpoint), (c) => c.charCodeAt(0))));
}

/** A checkpoint `ms` after `from` with these values and versions. */
function checkpointAt(from: number, ms: number, values: Record<string, unknown>, versions: Record<string, number>): Checkpoint {
  return { ...emptyCheckpoint(), id: uuid6(-1), ts: new Date(from + ms).toISOString(), channel_values: values, channel_versions: versions };
}

for (const [reanchorMs, refers] of [[60_000, true], [0, false]] as const) {
  test(`an unchanged channel is ${refers ? 'referred to' : 'stored again'} with reanchorMs ${reanchorMs}`, async () => {
    const saver = new MemdSaver({ client, app: APP, user: USER, reanchorMs });
    const thread = `delta-${uuidv7()}`;
    const t0 = Date.now();
    const parent = checkpointAt(t0, 0, { big: 'a'.repeat(1000), small: 1 }, { big: 1, small: 1 });
    const c1 = await saver.put({ configurable: { thread_id: thread } }, parent, { source: 'loop', step: 0, parents: {} }, { big: 1, small: 1 });
    const child = checkpointAt(t0, 1000, { big: 'a'.repeat(1000), small: 2 }, { big: 1, small: 2 });
    const c2 = await saver.put(c1, child, { source: 'loop', step: 1, parents: {} }, { small: 2 });

    const raw = await stored(thread, child.id);
    assert.equal(raw.checkpoint.channel_values.small, 2);
    if (refers) {
      assert.equal('big' in raw.checkpoint.channel_values, false, 'the unchanged channel is not stored again');
      assert.deepEqual(raw.carried, { big: [parent.id, parent.ts] });
    } else {
      assert.equal(raw.checkpoint.channel_values.big, 'a'.repeat(1000));
      assert.deepEqual(raw.carried, {});
    }
    // Another saver (no record of the puts) reads the whole checkpoint.
    const fresh = new MemdSaver({ client, app: APP, user: USER });
    const back = await fresh.getTuple(c2);
    assert.deepEqual(back?.checkpoint, child);
  });
}

test('interrupt and resume writes set the run state; finish() ends the run', async () => {
  const saver = new MemdSaver({ client, app: APP, user: USER });
  const thread = `state-${uuidv7()}`;
  const cp = emptyCheckpoint();
  const config = await saver.put({ configurable: { thread_id: thread } }, cp, { source: 'loop', step: 0, parents: {} }, {});
  const state = async () => (await client.getCheckpoint({ app: APP, user: USER, sid: thread, cid: cp.id })).run_state;
  assert.equal(await state(), 'running');
  await saver.putWrites(config, [['__interrupt__', [{ value: 'ok?' }]]], 'ask');
  assert.equal(await state(), 'interrupted');
  await saver.putWrites(config, [['__resume__', 'yes']], '00000000-0000-0000-0000-000000000000');
  assert.equal(await state(), 'running');
  await saver.putWrites(config, [['out', 1]], 'work');
  assert.equal(await state(), 'running');
  await saver.finish({ configurable: { thread_id: thread } });
  assert.equal(await state(), 'done');
  // A special channel's write replaces the stored one; a plain one is kept.
  await saver.putWrites(config, [['__interrupt__', [{ value: 'again?' }]]], 'ask');
  await saver.putWrites(config, [['out', 2]], 'work');
  const t = await saver.getTuple(config);
  assert.deepEqual(t?.pendingWrites?.filter(([task]) => task !== '00000000-0000-0000-0000-000000000000'),
    [['ask', '__interrupt__', [{ value: 'again?' }]], ['work', 'out', 1]]);
});

test('pending writes come back in writesSortKey order, each with its task path', async () => {
  const saver = new MemdSaver({ client, app: APP, user: USER });
  const thread = `order-${uuidv7()}`;
  const cp = emptyCheckpoint();
  const config = await saver.put({ configurable: { thread_id: thread } }, cp, { source: 'loop', step: 0, parents: {} }, {});
  // Put in neither path nor task id order. The paths order otherwise than
  // the task ids; two differ only past a shared prefix; a task has no
  // path (it sorts first); U+FF41 comes before U+1F600 by code point but
  // after it by UTF-16 code unit; a special channel's write has idx -1.
  const puts: [string, string | undefined, PendingWrite[]][] = [
    ['a', '~__pregel_pull, b', [['out', 'a0'], ['log', 'a1']]],
    ['e', '~__pregel_push, 0000000002, \uff41', [['out', 'e0']]],
    ['input', undefined, [['out', 'in0']]],
    ['b', '~__pregel_pull, a', [['out', 'b0'], ['log', 'b1']]],
    ['d', '~__pregel_push, 0000000002, \u{1f600}', [['out', 'd0']]],
    ['c', '~__pregel_pull, ab', [['out', 'c0']]],
    ['b', '~__pregel_pull, a', [[ERROR, 'b failed']]],
  ];
  for (const [taskId, taskPath, writes] of puts) await saver.putWrites(config, writes, taskId, taskPath);

  // LangGraph's own comparator says the order.
  const all = puts.flatMap(([taskId, taskPath, writes]) => writes.map(([channel, value], i) => ({
    key: writesSortKey(taskPath ?? '', taskId, channel in WRITES_IDX_MAP ? WRITES_IDX_MAP[channel] : i),
    write: [taskId, channel, value] as CheckpointPendingWrite,
  })));
  const want = [...all].sort((x, y) => compareWritesSortKeys(x.key, y.key));
  const byId = [...all].sort((x, y) => compareWritesSortKeys(['', x.key[1], x.key[2]], ['', y.key[1], y.key[2]]));
  assert.notDeepEqual(want.map((w) => w.write), byId.map((w) => w.write), 'path order is not task id order');
  const utf16 = [...all].sort((x, y) => (x.key[0] < y.key[0] ? -1 : x.key[0] > y.key[0] ? 1 : compareWritesSortKeys(x.key, y.key)));
  assert.notDeepEqual(want.map((w) => w.write), utf16.map((w) => w.write), 'code point order is not UTF-16 order');

  // A saver that did not put them reads them back, by getTuple and list.
  const fresh = new MemdSaver({ client, app: APP, user: USER });
  assert.deepEqual((await fresh.getTuple(config))?.pendingWrites, want.map((w) => w.write));
  const listed: CheckpointTuple[] = [];
  for await (const t of fresh.list({ configurable: { thread_id: thread } })) listed.push(t);
  assert.equal(listed.length, 1);
  assert.deepEqual(listed[0].pendingWrites, want.map((w) => w.write));
  // memd keeps each write's path ("" for none).
  const raw = await client.getCheckpoint({ app: APP, user: USER, sid: thread, cid: cp.id });
  assert.deepEqual(raw.pending_writes?.map((w) => [w.task_path, w.task_id, w.idx]), want.map((w) => w.key));
});
