// SPDX-License-Identifier: MIT
// Type-level checks, run by tsc when the package builds (never executed):
// each line marked @ts-expect-error must be a type error, so a client
// whose types stopped following the spec (a wrong parameter name, a
// missing path parameter, a body member the spec lacks, If-Match on a
// route without it, an answer typed loosely) fails the build.

import { MemdClient, type Params, type Result, type Schemas } from '../src/index.js';

export async function typeChecks(memd: MemdClient): Promise<void> {
  const sid = { app: 'a', user: 'u', sid: 's' };

  // Parameters: by their names in the spec.
  await memd.getSession({ ...sid, events: 10, after_seq: 2, include_text: true });
  // @ts-expect-error: `event` is not a parameter of getSession (`events` is)
  await memd.getSession({ ...sid, event: 10 });
  // @ts-expect-error: the path parameter sid is missing
  await memd.getSession({ app: 'a', user: 'u' });
  // @ts-expect-error: limit is a number
  await memd.listSessions({ app: 'a', user: 'u', limit: '10' });
  // @ts-expect-error: order is created or activity
  await memd.listSessions({ app: 'a', user: 'u', order: 'oldest' });

  // Bodies: the spec's schemas, closed where the spec closes them.
  await memd.appendEvents(sid, { events: [{ role: 'user', content: 'hi' }], expected_version: 1 });
  // @ts-expect-error: `expectedVersion` is not a member of an append (expected_version is)
  await memd.appendEvents(sid, { events: [], expectedVersion: 1 });
  // @ts-expect-error: role is one of user, assistant, system, tool
  await memd.appendEvents(sid, { events: [{ role: 'robot', content: 'hi' }] });
  // @ts-expect-error: search needs a body with its query
  await memd.search({ app: 'a', user: 'u' });

  // Options: If-Match only where the operation takes it.
  await memd.updateMemory({ app: 'a', user: 'u', mid: 'm' }, { text: 't' }, { ifMatch: 2 });
  // @ts-expect-error: getSession takes no If-Match
  await memd.getSession(sid, { ifMatch: 2 });

  // Answers: the spec's schemas, a union where there are several, undefined for 204.
  const session: Schemas['Session'] = await memd.getSession(sid);
  // @ts-expect-error: a Session has no member `sessionId`
  void session.sessionId;
  const deleted: undefined = await memd.deleteSession(sid);
  void deleted;
  const format: 'openai' | undefined = sid.app === 'x' ? 'openai' : undefined;
  const ctx: Result<'getContext'> = await memd.getContext({ ...sid, format });
  // @ts-expect-error: with a format known only at run time, the answer is a union: `events` only once narrowed
  void ctx.events;
  // The format parameter picks the context's form.
  const native: Schemas['Context'] = await memd.getContext(sid);
  void native.events;
  const chat: Schemas['OpenAIContext'] = await memd.getContext({ ...sid, format: 'openai' });
  void chat.messages;
  // @ts-expect-error: the OpenAI form has no `events`
  void (await memd.getContext({ ...sid, format: 'openai' })).events;
  // return: 'context' adds the context right after the write, typed by the format.
  const step = await memd.appendMessages({ ...sid, return: 'context', format: 'openai' }, { messages: [] });
  if (step.context) { const next: Schemas['OpenAIContext'] = step.context; void next.messages; }
  else { const why: Schemas['ErrorDetail'] = step.context_error; void why.code; }
  const stepNative = await memd.appendEvents({ ...sid, return: 'context' }, { events: [] });
  if (stepNative.context) void stepNative.context.events;
  // @ts-expect-error: the context may have failed (context_error): narrow first
  void stepNative.context.events;
  // @ts-expect-error: without return: 'context' the answer has no context
  void (await memd.appendEvents(sid, { events: [] })).context.events;
  const opened = await memd.openLane({ app: 'a', user: 'u', key: 'k', return: 'context', format: 'openai' });
  if (opened.context) void opened.context.messages;
  const metrics: string = await memd.metrics();
  void metrics;

  // Params is what the methods take.
  const p: Params<'listEvents'> = { ...sid, after_seq: 3 };
  // @ts-expect-error: listEvents has no cursor (it pages by after_seq)
  const q: Params<'listEvents'> = { ...sid, cursor: 'x' };
  void p; void q;
}
