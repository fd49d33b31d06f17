// SPDX-License-Identifier: MIT
// memd as Google ADK's services, against a real memd serve: an ADK
// Runner runs a scripted conversation on MemdSessionService,
// MemdArtifactService and MemdMemoryService, and the same script on ADK's
// in-memory services; the results agree, memd's own REST view of the
// session is memd's native one, another process continues the session,
// and the ADK contract's edges hold.
// Usage: MEMD_URL=... node --test adk_test.js (tests/clients/adk_test.sh runs it).

import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  InMemoryArtifactService,
  InMemoryMemoryService,
  InMemorySessionService,
  createEvent,
  createEventActions,
  type BaseArtifactService,
  type BaseSessionService,
  type Event,
  type Session,
} from '@google/adk';
import { MemdClient } from '../../src/index.js';
import {
  ENVELOPE_MEDIA_TYPE,
  MemdArtifactService,
  MemdMemoryService,
  MemdSessionService,
  USER_ARTIFACTS_SESSION,
} from '../../src/adk/index.js';
import {
  APP,
  USER,
  firstSteps,
  firstTurns,
  lastSteps,
  lastTurn,
  recallSteps,
  recallTool,
  runner,
  turn,
} from './script.js';

const baseUrl = process.argv[2] ?? process.env.MEMD_URL;
if (!baseUrl) {
  console.error("usage: MEMD_URL=http://HOST:PORT node --test adk_test.js");
  process.exit(2);
}

const client = new MemdClient({ baseUrl });
const memd = {
  sessionService: new MemdSessionService({ client }),
  artifactService: new MemdArtifactService({ client }),
  memoryService: new MemdMemoryService({ client }),
};
const mem = {
  sessionService: new InMemorySessionService(),
  artifactService: new InMemoryArtifactService(),
  memoryService: new InMemoryMemoryService(),
};
const SID = 's1';

/** v as JSON gives it (undefined members gone, null prototypes plain). */
function json<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** An event without what differs between two runs of one script. */
function norm(e: Event): Record<string, unknown> {
  const { id: _id, timestamp: _ts, invocationId: _inv, ...rest } = json(e);
  return rest;
}

/** Any memd answer, loosely typed for the checks. */
type Json = Record<string, any>;

const expectedState = {
  topic: 'colours',
  colour: 'blue',
  'app:theme': 'dark',
  'user:language': 'en',
  mood: 'curious',
};

let memdSession: Session;
let memSession: Session;
let yielded: Event[] = [];

test('a Runner conversation on memd equals the same on ADK in-memory services', async () => {
  for (const s of [memd, mem])
    await s.sessionService.createSession({
      appName: APP,
      userId: USER,
      sessionId: SID,
      state: { topic: 'colours', 'temp:init': 'never stored' },
    });
  yielded = await firstTurns(runner(memd, firstSteps()), SID);
  await firstTurns(runner(mem, firstSteps()), SID);

  // The last turn: on memd by a Runner in another process, in memory here.
  const child = spawnSync(process.execPath, [fileURLToPath(new URL('./continue.js', import.meta.url)), baseUrl, SID], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(child.status, 0, `the second process failed: ${child.stderr}`);
  const continued = JSON.parse(child.stdout) as { events: Event[]; state: Json };
  assert.deepEqual(continued.state, expectedState, 'the second process sees the state');
  assert.equal(continued.events.at(-1)?.content?.parts?.[0]?.text, 'Your favourite colour is blue.');
  await lastTurn(runner(mem, lastSteps()), SID);

  memdSession = (await memd.sessionService.getSession({ appName: APP, userId: USER, sessionId: SID }))!;
  memSession = (await mem.sessionService.getSession({ appName: APP, userId: USER, sessionId: SID }))!;
  assert.ok(memdSession && memSession);
  assert.equal(memdSession.events.length, 8);
  assert.deepEqual(memdSession.events.map(norm), memSession.events.map(norm), 'events (normalised)');
  assert.deepEqual(json(memdSession.state), json(memSession.state), 'state');
  assert.deepEqual(json(memdSession.state), expectedState);
  // What the runners yielded (every event but the user's) is what memd
  // gives back, field by field.
  const all = [...yielded, ...continued.events];
  assert.deepEqual(
    memdSession.events.filter((e) => e.author !== 'user').map((e) => e.id),
    all.map((e) => e.id),
  );
  for (const e of all)
    assert.deepEqual(json(memdSession.events.find((x) => x.id === e.id)), json(e), `event ${e.id} as yielded`);
  // temp: never persisted, neither in state nor in an event's delta.
  for (const e of memdSession.events)
    for (const k of Object.keys(e.actions.stateDelta)) assert.ok(!k.startsWith('temp:'), `event ${e.id} has ${k}`);
  const toolEvent = memdSession.events[2];
  assert.deepEqual(json(toolEvent.actions.stateDelta), {
    colour: 'blue',
    'app:theme': 'dark',
    'user:language': 'en',
  });
  assert.deepEqual(toolEvent.actions.artifactDelta, { 'notes.txt': 0, 'user:profile.json': 0 });
});

test("memd's REST view of the ADK session agrees and is memd's native one", async () => {
  const key = { app: APP, user: USER, sid: SID };
  const got = (await client.getSession({ ...key, events: 0 })) as Json;
  const rest = got.events as Json[];
  const listed: Json[] = [];
  for await (const e of client.events(key)) listed.push(e as Json);
  assert.deepEqual(listed, rest, 'listEvents equals getSession events');
  assert.equal(rest.length, memdSession.events.length);
  rest.forEach((r, i) => {
    const e = memdSession.events[i];
    assert.equal(r.id, e.id);
    assert.equal(r.invocation_id, e.invocationId);
    assert.equal(r.author, e.author);
    assert.equal(r.branch, e.branch ?? null);
    assert.equal(Date.parse(r.timestamp), e.timestamp);
    assert.deepEqual(r.actions, json(e.actions));
    assert.deepEqual(r.metadata.adk.content, json(e.content));
  });
  assert.deepEqual(
    rest.map((r) => r.role),
    ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant', 'user', 'assistant'],
  );
  assert.deepEqual(rest[1].content.parts, [
    { tool_call: { id: 'call-1', name: 'note_preference', args: { colour: 'blue' } } },
  ]);
  assert.deepEqual(rest[2].content.parts, [
    { tool_result: { id: 'call-1', name: 'note_preference', content: { saved: true, notes: 0, profile: 0 } } },
  ]);
  assert.deepEqual(rest[3].content.parts, [{ text: 'Noted: your favourite colour is blue.' }]);
  assert.deepEqual(rest[1].metadata.adk.usageMetadata, {
    promptTokenCount: 40,
    candidatesTokenCount: 6,
    totalTokenCount: 46,
  });
  // The model call's usage went into memd's sums with its event.
  assert.equal(got.usage.input_tokens, 40);
  assert.equal(got.usage.output_tokens, 6);
  assert.equal(got.usage.last_prompt_tokens, 40);
  const state = (await client.getState(key)) as Json;
  assert.deepEqual(state, json(memdSession.state));

  const ctx = (await client.getContext({ ...key, format: 'openai' })) as Json;
  const msgs = ctx.messages as Json[];
  assert.deepEqual(msgs[0], { role: 'user', content: 'My favourite colour is blue; please note it.' });
  const call = msgs.find((m) => m.role === 'assistant' && m.tool_calls);
  assert.equal(call?.tool_calls[0].id, 'call-1');
  assert.equal(call?.tool_calls[0].function.name, 'note_preference');
  assert.deepEqual(JSON.parse(call?.tool_calls[0].function.arguments), { colour: 'blue' });
  const result = msgs.find((m) => m.role === 'tool');
  assert.equal(result?.tool_call_id, 'call-1');
  assert.deepEqual(JSON.parse(result?.content), { saved: true, notes: 0, profile: 0 });
  assert.deepEqual(msgs.at(-1), { role: 'assistant', content: 'Your favourite colour is blue.' });
});

test('other sessions see the app: and user: state as ADK gives it; temp: is never stored', async () => {
  for (const [user, sid, want] of [
    [USER, 's2', { 'app:theme': 'dark', 'user:language': 'en' }],
    ['bob', 'b1', { 'app:theme': 'dark' }],
  ] as const) {
    const a = await memd.sessionService.createSession({ appName: APP, userId: user, sessionId: sid });
    const b = await mem.sessionService.createSession({ appName: APP, userId: user, sessionId: sid });
    assert.deepEqual(json(a.state), json(b.state), `${user}/${sid} on create`);
    assert.deepEqual(json(a.state), want);
    const again = await memd.sessionService.getSession({ appName: APP, userId: user, sessionId: sid });
    assert.deepEqual(json(again!.state), want, `${user}/${sid} read back`);
  }
  const state = (await client.getState({ app: APP, user: USER, sid: SID })) as Json;
  assert.ok(!Object.keys(state).some((k) => k.startsWith('temp:')), 'no temp: key in memd');
  // As ADK's database service: a session id that is taken is an error.
  await assert.rejects(
    memd.sessionService.createSession({ appName: APP, userId: USER, sessionId: SID }),
    /^Error: Session with id s1 already exists\.$/,
  );
});

test('artifacts the tool saved: session and user: scoped, listed as ADK lists them', async () => {
  for (const [user, sid, want] of [
    [USER, SID, ['notes.txt', 'user:profile.json']],
    [USER, 's2', ['user:profile.json']],
    ['bob', 'b1', []],
  ] as const) {
    const req = { appName: APP, userId: user, sessionId: sid };
    const a = await memd.artifactService.listArtifactKeys(req);
    assert.deepEqual(a, await mem.artifactService.listArtifactKeys(req), `${user}/${sid}`);
    assert.deepEqual(a, want);
    for (const filename of want) {
      const got = await memd.artifactService.loadArtifact({ ...req, filename });
      assert.deepEqual(got, await mem.artifactService.loadArtifact({ ...req, filename }), filename);
    }
  }
  // memd holds the user's artifact in the reserved session, out of ADK's listing.
  const reserved = (await client.listArtifacts({ app: APP, user: USER, sid: USER_ARTIFACTS_SESSION })) as Json;
  assert.deepEqual(
    reserved.artifacts.map((x: Json) => [x.name, x.version, x.mime_type]),
    [['user:profile.json', 1, 'application/json']],
  );
  const listed = await memd.sessionService.listSessions({ appName: APP, userId: USER });
  assert.deepEqual(listed.sessions.map((s) => s.id).sort(), [SID, 's2']);
});

test('artifact versions (0-based), metadata, envelopes and delete agree with ADK in-memory', async () => {
  const at = { appName: APP, userId: USER, sessionId: 's2' };
  const both = async <T>(f: (s: BaseArtifactService) => Promise<T>, what: string): Promise<T> => {
    const a = await f(memd.artifactService);
    assert.deepEqual(json(a ?? null), json((await f(mem.artifactService)) ?? null), what);
    return a;
  };
  const png = btoa(String.fromCharCode(0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255));
  assert.equal(await both((s) => s.saveArtifact({ ...at, filename: 'doc', artifact: { text: 'one' } }), 'save 0'), 0);
  assert.equal(
    await both(
      (s) => s.saveArtifact({ ...at, filename: 'doc', artifact: { inlineData: { data: png, mimeType: 'image/png' } } }),
      'save 1',
    ),
    1,
  );
  await both(
    (s) =>
      s.saveArtifact({
        ...at,
        filename: 'user:ref',
        artifact: { fileData: { fileUri: 'gs://bucket/report.pdf', mimeType: 'application/pdf' } },
        customMetadata: { source: 'upload', pages: 3 },
      }),
    'save fileData',
  );
  assert.deepEqual(await both((s) => s.listVersions({ ...at, filename: 'doc' }), 'versions'), [0, 1]);
  assert.deepEqual(await both((s) => s.loadArtifact({ ...at, filename: 'doc' }), 'latest'), {
    inlineData: { data: png, mimeType: 'image/png' },
  });
  assert.deepEqual(await both((s) => s.loadArtifact({ ...at, filename: 'doc', version: 0 }), 'version 0'), { text: 'one' });
  assert.equal(await both((s) => s.loadArtifact({ ...at, filename: 'doc', version: 7 }), 'version 7'), undefined);
  assert.equal(await both((s) => s.loadArtifact({ ...at, filename: 'none' }), 'absent'), undefined);
  await both((s) => s.loadArtifact({ ...at, filename: 'user:ref' }), 'fileData');
  await both((s) => s.loadArtifact({ ...at, sessionId: SID, filename: 'user:ref' }), 'user: from another session');
  await both((s) => s.getArtifactVersion({ ...at, filename: 'doc' }), 'getArtifactVersion latest');
  await both((s) => s.getArtifactVersion({ ...at, filename: 'doc', version: 0 }), 'getArtifactVersion 0');
  await both((s) => s.getArtifactVersion({ ...at, filename: 'doc', version: 2 }), 'getArtifactVersion 2');
  assert.deepEqual(
    await both((s) => s.getArtifactVersion({ ...at, filename: 'user:ref' }), 'fileData metadata'),
    { version: 0, customMetadata: { source: 'upload', pages: 3 }, mimeType: 'application/pdf' },
  );
  await both((s) => s.listArtifactVersions({ ...at, filename: 'doc' }), 'listArtifactVersions');
  await both((s) => s.listArtifactKeys(at), 'keys');
  // memd counts from 1; the envelope has its own media type.
  const vs = (await client.listArtifactVersions({ app: APP, user: USER, sid: 's2', name: 'doc' })) as Json;
  assert.deepEqual(
    vs.versions.map((v: Json) => [v.version, v.mime_type]),
    [
      [1, 'text/plain; charset=utf-8'],
      [2, 'image/png'],
    ],
  );
  const env = (await client.listArtifacts({ app: APP, user: USER, sid: USER_ARTIFACTS_SESSION })) as Json;
  assert.ok(env.artifacts.some((x: Json) => x.name === 'user:ref' && x.mime_type === ENVELOPE_MEDIA_TYPE));

  await both((s) => s.deleteArtifact({ ...at, filename: 'doc' }), 'delete');
  await both((s) => s.deleteArtifact({ ...at, filename: 'doc' }), 'delete again');
  assert.deepEqual(await both((s) => s.listVersions({ ...at, filename: 'doc' }), 'versions after delete'), []);
  assert.equal(await both((s) => s.loadArtifact({ ...at, filename: 'doc' }), 'load after delete'), undefined);
  await both((s) => s.listArtifactKeys(at), 'keys after delete');
  for (const s of [memd.artifactService, mem.artifactService])
    await assert.rejects(s.saveArtifact({ ...at, filename: 'empty', artifact: {} }), /inlineData or text/);
});

/** A user event for the edge tests. */
function userEvent(id: string, text: string, timestamp: number, stateDelta: Record<string, unknown> = {}): Event {
  return createEvent({
    id,
    invocationId: `inv-${id}`,
    author: 'user',
    timestamp,
    content: { role: 'user', parts: [{ text }] },
    actions: createEventActions({ stateDelta }),
  });
}

test('an append on a stale session fails as ADK’s database service does, or reloads', async () => {
  const key = { appName: APP, userId: USER, sessionId: 's2' };
  const stale = (await memd.sessionService.getSession(key))!;
  const other = new MemdSessionService({ client });
  const fresh = (await other.getSession(key))!;
  await other.appendEvent({ session: fresh, event: userEvent('other-1', 'from the other writer', Date.now(), { seen: 1 }) });

  await assert.rejects(
    memd.sessionService.appendEvent({ session: stale, event: userEvent('stale-1', 'stale', Date.now()) }),
    /^Error: The last_update_time provided in the session object \S+ is earlier than the update time in the storage_session \S+\. Please check if it is a stale session\./,
  );
  const ids = async () => (await memd.sessionService.getSession(key))!.events.map((e) => e.id);
  assert.deepEqual(await ids(), ['other-1'], 'nothing written for the stale append');
  assert.deepEqual(stale.events, [], 'the stale object is left as it was');

  const reloading = new MemdSessionService({ client, onStale: 'reload' });
  const old = (await reloading.getSession(key))!;
  const fresh2 = (await other.getSession(key))!;
  await other.appendEvent({ session: fresh2, event: userEvent('other-2', 'again', Date.now(), { seen: 2 }) });
  await reloading.appendEvent({ session: old, event: userEvent('mine-1', 'mine', Date.now(), { mine: true }) });
  assert.deepEqual(
    old.events.map((e) => e.id),
    ['other-1', 'other-2', 'mine-1'],
    'reloaded, then appended',
  );
  assert.equal(old.state.seen, 2);
  assert.equal(old.state.mine, true);
  assert.deepEqual(await ids(), ['other-1', 'other-2', 'mine-1']);
  // The reloaded object is current: the next append needs no reload.
  await memd.sessionService.appendEvent({ session: (await memd.sessionService.getSession(key))!, event: userEvent('mine-2', 'next', Date.now()) });
});

test('a partial event is returned unchanged and not stored', async () => {
  for (const s of [memd.sessionService, mem.sessionService] as BaseSessionService[]) {
    const key = { appName: APP, userId: 'bob', sessionId: 'b1' };
    const session = (await s.getSession(key))!;
    const partial = { ...userEvent('partial-1', 'stream', Date.now(), { streamed: true }), partial: true };
    assert.equal(await s.appendEvent({ session, event: partial }), partial);
    assert.deepEqual(session.events, []);
    const again = (await s.getSession(key))!;
    assert.deepEqual(again.events, []);
    assert.equal(again.state.streamed, undefined);
  }
  const page = (await client.listEvents({ app: APP, user: 'bob', sid: 'b1' })) as Json;
  assert.deepEqual(page.events, []);
});

test('getSession numRecentEvents and afterTimestamp', async () => {
  const base = Date.parse('2026-01-01T00:00:00Z');
  const key = { appName: APP, userId: 'dora', sessionId: 'times' };
  const results: Json[] = [];
  for (const s of [memd.sessionService, mem.sessionService] as BaseSessionService[]) {
    const session = await s.createSession(key);
    for (let i = 1; i <= 5; i++)
      await s.appendEvent({ session, event: userEvent(`t${i}`, `message ${i}`, base + i * 1000) });
    const ids = async (config: Json) => (await s.getSession({ ...key, config }))!.events.map((e) => e.id);
    results.push({
      recent: await ids({ numRecentEvents: 2 }),
      after: await ids({ afterTimestamp: base + 2500 }),
      all: await ids({}),
      events: json((await s.getSession(key))!.events),
    });
  }
  assert.deepEqual(results[0], results[1]);
  assert.deepEqual(results[0].recent, ['t4', 't5']);
  assert.deepEqual(results[0].after, ['t3', 't4', 't5']);
});

test('listSessions pages as ADK does; deleteSession', async () => {
  const out: Json[] = [];
  for (const s of [memd.sessionService, mem.sessionService] as BaseSessionService[]) {
    for (let i = 1; i <= 5; i++) await s.createSession({ appName: APP, userId: 'carol', sessionId: `c${i}` });
    const list = async (req: Json) => {
      const r = await s.listSessions({ appName: APP, userId: 'carol', ...req });
      return { ...r, sessions: r.sessions.map((x) => [x.id, json(x.state), x.events.length]) };
    };
    const all = await s.listSessions({ appName: APP, userId: 'carol', order: 'desc' });
    for (let i = 1; i < all.sessions.length; i++)
      assert.ok(all.sessions[i - 1].lastUpdateTime >= all.sessions[i].lastUpdateTime, 'desc order');
    const r: Json = {
      page2: await list({ limit: 2, page: 2, order: 'asc' }),
      offset: await list({ limit: 2, offset: 3, order: 'asc' }),
      last: await list({ limit: 2, page: 3, order: 'asc' }),
      nolimit: await list({ offset: 1, order: 'asc' }),
      none: await s.listSessions({ appName: APP, userId: 'nobody', limit: 2 }),
    };
    await s.deleteSession({ appName: APP, userId: 'carol', sessionId: 'c5' });
    await s.deleteSession({ appName: APP, userId: 'carol', sessionId: 'c5' });
    await s.deleteSession({ appName: APP, userId: 'carol', sessionId: 'never' });
    r.deleted = await s.getSession({ appName: APP, userId: 'carol', sessionId: 'c5' });
    r.after = await list({ order: 'asc' });
    out.push(r);
  }
  assert.deepEqual(out[0], out[1]);
  assert.deepEqual(out[0].page2, {
    sessions: [
      ['c3', {}, 0],
      ['c4', {}, 0],
    ],
    page: 2,
    limit: 2,
    totalItems: 5,
    totalPages: 3,
  });
  assert.equal(out[0].deleted, undefined);
  assert.equal(out[0].after.totalItems, 4);
  await assert.rejects(memd.sessionService.listSessions({ appName: APP }), /userId/);
});

test("searchMemory finds an earlier session's content; addSessionToMemory extracts memd memories", async () => {
  const found = await memd.memoryService.searchMemory({ appName: APP, userId: USER, query: 'favourite colour' });
  const texts = found.memories.map((m) => m.content.parts?.[0]?.text ?? '');
  assert.ok(texts.some((t) => t.includes('My favourite colour is blue')), `search: ${JSON.stringify(texts)}`);
  const hit = found.memories.find((m) => m.content.parts?.[0]?.text?.includes('My favourite colour is blue'))!;
  assert.equal(hit.author, 'user');
  assert.equal(hit.content.role, 'user');
  assert.ok(hit.timestamp && !Number.isNaN(Date.parse(hit.timestamp)));
  assert.equal(found.memories.some((m) => m.author === 'bob'), false);

  // An agent in a later session recalls it through ADK's tool context.
  await memd.sessionService.createSession({ appName: APP, userId: USER, sessionId: 's3' });
  await turn(runner(memd, recallSteps(), [recallTool()]), 's3', 'Do you know my favourite colour?');
  const s3 = (await memd.sessionService.getSession({ appName: APP, userId: USER, sessionId: 's3' }))!;
  const response = s3.events
    .flatMap((e) => e.content?.parts ?? [])
    .find((p) => p.functionResponse?.name === 'recall')?.functionResponse?.response as { texts: string[] } | undefined;
  assert.ok(
    response?.texts.includes('My favourite colour is blue; please note it.'),
    `recall: ${JSON.stringify(response)}`,
  );

  await memd.memoryService.addSessionToMemory(memdSession);
  const list = (await client.listMemories({ app: APP, user: USER })) as Json;
  const texts2 = (list.memories as Json[]).map((m) => String(m.text));
  assert.ok(texts2.some((t) => /peanut/i.test(t)), `memories: ${JSON.stringify(texts2)}`);
  const recalled = await memd.memoryService.searchMemory({ appName: APP, userId: USER, query: 'peanuts allergy' });
  assert.ok(
    recalled.memories.some((m) => m.author === 'memory' && /peanut/i.test(m.content.parts?.[0]?.text ?? '')),
    `recalled: ${JSON.stringify(recalled.memories)}`,
  );
});

test('events other memd clients wrote read back as ADK events from their native parts', async () => {
  const key = { app: APP, user: 'erin', sid: 'native' };
  await client.createSession({ app: APP, user: 'erin' }, { id: 'native' });
  await client.appendEvents(key, {
    events: [
      { id: 'n1', role: 'user', author: 'erin', invocation_id: 'inv-n', content: 'What is the weather in Oslo?' },
      {
        id: 'n2',
        role: 'assistant',
        author: 'bot',
        invocation_id: 'inv-n',
        content: { parts: [{ tool_call: { id: 'w1', name: 'weather', args: { city: 'Oslo' } } }] },
      },
      {
        id: 'n3',
        role: 'tool',
        invocation_id: 'inv-n',
        content: { parts: [{ tool_result: { id: 'w1', name: 'weather', content: 'rain, 4 C' } }] },
      },
      { id: 'n4', role: 'assistant', author: 'bot', invocation_id: 'inv-n', content: { parts: [{ text: 'Rain, 4 degrees.' }] } },
    ],
  });
  const s = (await memd.sessionService.getSession({ appName: APP, userId: 'erin', sessionId: 'native' }))!;
  const got = json(s.events).map(({ timestamp, ...e }) => {
    assert.equal(typeof timestamp, 'number');
    return e;
  });
  const actions = json(createEventActions());
  assert.deepEqual(got, [
    { id: 'n1', invocationId: 'inv-n', author: 'erin', actions, content: { role: 'user', parts: [{ text: 'What is the weather in Oslo?' }] } },
    {
      id: 'n2',
      invocationId: 'inv-n',
      author: 'bot',
      actions,
      content: { role: 'model', parts: [{ functionCall: { id: 'w1', name: 'weather', args: { city: 'Oslo' } } }] },
    },
    {
      id: 'n3',
      invocationId: 'inv-n',
      author: 'tool',
      actions,
      content: { role: 'user', parts: [{ functionResponse: { id: 'w1', name: 'weather', response: { result: 'rain, 4 C' } } }] },
    },
    { id: 'n4', invocationId: 'inv-n', author: 'bot', actions, content: { role: 'model', parts: [{ text: 'Rain, 4 degrees.' }] } },
  ]);
});

test('a session larger than one memd answer reads in pages', async () => {
  // memd serves this test with server.max_response_bytes at its minimum,
  // 64 KiB: 40 events of 2 KiB are more than one answer holds.
  const key = { appName: APP, userId: 'frank', sessionId: 'long' };
  const base = Date.parse('2026-02-01T00:00:00Z');
  const read: Json[] = [];
  for (const s of [memd.sessionService, mem.sessionService] as BaseSessionService[]) {
    const session = await s.createSession(key);
    for (let i = 1; i <= 40; i++)
      await s.appendEvent({ session, event: userEvent(`l${i}`, `${i} `.padEnd(2048, 'x'), base + i * 1000) });
    const get = async (config?: Json) => json((await s.getSession({ ...key, config }))!.events);
    read.push({ all: await get(), recent: await get({ numRecentEvents: 35 }), after: await get({ afterTimestamp: base + 4500 }) });
  }
  assert.deepEqual(read[0], read[1]);
  assert.equal(read[0].all.length, 40);
  assert.equal(read[0].recent[0].id, 'l6');
  assert.equal(read[0].after[0].id, 'l5');
  await assert.rejects(
    client.getSession({ app: APP, user: 'frank', sid: 'long', events: 0 }),
    (err: Json) => err.status === 413,
    'memd cannot answer the session whole',
  );
});

test("parts memd's native parts cannot say, and events without content, read back as stored", async () => {
  const key = { appName: APP, userId: 'gina', sessionId: 'parts' };
  const t = Date.parse('2026-03-01T00:00:00Z');
  const events: Event[] = [
    createEvent({
      id: 'p1',
      invocationId: 'inv-p',
      author: 'helper',
      timestamp: t,
      branch: 'helper.sub',
      content: {
        role: 'model',
        parts: [
          { text: 'thinking about it', thought: true },
          { text: 'Here is the chart.' },
          { inlineData: { data: btoa('chart'), mimeType: 'image/png' } },
          { fileData: { fileUri: 'gs://bucket/chart.csv', mimeType: 'text/csv' } },
          { functionCall: { id: 'c9', name: 'plot', args: { kind: 'bar' } } },
        ],
      },
      longRunningToolIds: ['c9'],
      customMetadata: { source: 'test' },
    }),
    // No content: a state change of the agent's.
    createEvent({
      id: 'p2',
      invocationId: 'inv-p',
      author: 'helper',
      timestamp: t + 1.5,
      actions: createEventActions({ stateDelta: { step: 2 }, escalate: true }),
    }),
  ];
  const read: Json[] = [];
  for (const s of [memd.sessionService, mem.sessionService] as BaseSessionService[]) {
    const session = await s.createSession(key);
    for (const e of events) await s.appendEvent({ session, event: json(e) });
    const back = (await s.getSession(key))!;
    read.push({ events: json(back.events), state: json(back.state) });
  }
  assert.deepEqual(read[0], read[1]);
  assert.deepEqual(read[0].events, json(events));
  const rest = (await client.listEvents({ app: APP, user: 'gina', sid: 'parts' })) as Json;
  assert.deepEqual(
    rest.events.map((e: Json) => [e.role, e.branch, e.content.parts]),
    [
      [
        'assistant',
        'helper.sub',
        [{ text: 'Here is the chart.' }, { tool_call: { id: 'c9', name: 'plot', args: { kind: 'bar' } } }],
      ],
      ['assistant', null, []],
    ],
  );
});
