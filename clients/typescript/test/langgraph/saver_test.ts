// SPDX-License-Identifier: MIT
// What MemdSaver stores in memd, read back through memd's REST API: a
// checkpoint holds the values of the channels that changed in its step and
// refers to the ancestor holding the others, unless that one is older than
// reanchorMs; the run state follows interrupt and resume writes.
// Usage: MEMD_URL=... node --test saver_test.js (tests/clients/langgraph_test.sh runs it).

import test from 'node:test';
import assert from 'node:assert/strict';
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint';
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
