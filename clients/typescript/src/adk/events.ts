// SPDX-License-Identifier: MIT
// ADK events <-> memd events. An ADK Event is stored as one memd event:
// memd's own fields (id, invocation_id, author, branch, timestamp, role,
// content in memd's native parts, actions) hold what they can, so that
// memd's context, windows, search and OpenAI format work on ADK sessions;
// metadata.adk holds the rest (the original genai content, partial,
// turnComplete, usageMetadata, longRunningToolIds, ...), so that reading
// an event back gives ADK the event it stored, equal field by field.
// Events other memd clients wrote (no metadata.adk) convert from memd's
// native parts.

import type { Event, EventActions } from '@google/adk';
import type { Content, Part } from '@google/genai';
import type { Schemas } from '../index.js';

/** The key of metadata that holds what memd's fields cannot. */
export const ADK_METADATA_KEY = 'adk';

/** A memd event as memd answers it (the fields this mapping reads). */
export type MemdEventRecord = Pick<
  Schemas['Event'],
  'id' | 'invocation_id' | 'author' | 'role' | 'branch' | 'content' | 'actions' | 'metadata' | 'timestamp'
>;

/** A memd event as an append sends it: every field ADK's event has. */
export type MemdEventInput = Schemas['EventInput'] & {
  id: string;
  role: 'user' | 'assistant' | 'tool';
  content: Schemas['Content'];
  metadata: Record<string, unknown>;
  timestamp: string;
};

/** The fields of an ADK Event that memd's own event fields hold. */
const MEMD_FIELDS = new Set(['id', 'invocationId', 'author', 'branch', 'timestamp', 'actions']);

/** A JSON copy of v: what storing it and reading it back gives. */
export function jsonCopy<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

/** The memd role of an ADK event: user content is user, model content
 * assistant, content made only of function responses tool; an event
 * without content is its author's (user, else assistant). */
export function memdRole(event: Event): 'user' | 'assistant' | 'tool' {
  const parts = event.content?.parts ?? [];
  if (parts.length > 0 && parts.every((p) => p.functionResponse !== undefined)) return 'tool';
  if (event.content?.role === 'user') return 'user';
  if (event.content?.role === 'model') return 'assistant';
  return event.author === 'user' ? 'user' : 'assistant';
}

/** A genai part in memd's native form, or undefined for a part memd's
 * parts cannot say (inline data, files, code, thoughts: they stay in
 * metadata.adk). */
function memdPart(part: Part): Record<string, unknown> | undefined {
  if (part.thought) return undefined;
  if (typeof part.text === 'string') return { text: part.text };
  if (part.functionCall) {
    const c = part.functionCall;
    return { tool_call: { id: c.id ?? null, name: c.name ?? '', args: c.args ?? {} } };
  }
  if (part.functionResponse) {
    const r = part.functionResponse;
    return { tool_result: { id: r.id ?? null, name: r.name ?? '', content: r.response ?? null } };
  }
  return undefined;
}

/** The memd event an ADK event is stored as. The event's stateDelta goes
 * into the append's state_delta, not here. */
export function toMemdEvent(event: Event): MemdEventInput {
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(event)) {
    if (!MEMD_FIELDS.has(k) && v !== undefined) rest[k] = v;
  }
  // memd keeps microseconds; a timestamp finer than a millisecond is kept
  // as ADK gave it.
  if (!Number.isInteger(event.timestamp)) rest.timestamp = event.timestamp;
  const parts = (event.content?.parts ?? [])
    .map(memdPart)
    .filter((p): p is Record<string, unknown> => p !== undefined);
  return {
    id: event.id,
    invocation_id: event.invocationId || null,
    author: event.author ?? null,
    role: memdRole(event),
    branch: event.branch ?? null,
    content: { parts },
    actions: event.actions ? (jsonCopy(event.actions) as unknown as Record<string, unknown>) : null,
    metadata: { [ADK_METADATA_KEY]: jsonCopy(rest) },
    timestamp: new Date(Math.floor(event.timestamp)).toISOString(),
  };
}

/** ADK's empty actions (as createEventActions makes them), with what a
 * stored actions object has over them. */
function adkActions(actions: Record<string, unknown> | null | undefined): EventActions {
  return {
    stateDelta: {},
    artifactDelta: {},
    requestedAuthConfigs: {},
    requestedToolConfirmations: {},
    ...(actions ?? {}),
  } as EventActions;
}

/** memd's native parts as genai parts. */
function genaiParts(parts: Array<Record<string, unknown>>): Part[] {
  const out: Part[] = [];
  for (const p of parts) {
    const call = p.tool_call as Record<string, unknown> | undefined;
    const result = p.tool_result as Record<string, unknown> | undefined;
    if (typeof p.text === 'string') {
      out.push({ text: p.text });
    } else if (call && typeof call === 'object') {
      out.push({
        functionCall: {
          ...(typeof call.id === 'string' ? { id: call.id } : {}),
          name: String(call.name ?? ''),
          args: (call.args as Record<string, unknown>) ?? {},
        },
      });
    } else if (result && typeof result === 'object') {
      const c = result.content ?? result.result;
      out.push({
        functionResponse: {
          ...(typeof result.id === 'string' ? { id: result.id } : {}),
          name: String(result.name ?? ''),
          response:
            c !== null && typeof c === 'object' && !Array.isArray(c)
              ? (c as Record<string, unknown>)
              : { result: c ?? null },
        },
      });
    }
  }
  return out;
}

/** The ADK event a memd event reads back as: the event ADK stored when
 * metadata.adk is there, else one converted from memd's native parts
 * (user and tool events as genai role user, the others as model). */
export function toAdkEvent(e: MemdEventRecord): Event {
  const adk = e.metadata?.[ADK_METADATA_KEY];
  const ts = Date.parse(e.timestamp);
  const ev: Record<string, unknown> = {};
  if (adk !== null && typeof adk === 'object' && !Array.isArray(adk)) {
    Object.assign(ev, jsonCopy(adk));
  } else {
    const parts = e.content?.parts ?? [];
    const content: Content = {
      role: e.role === 'user' || e.role === 'tool' ? 'user' : 'model',
      parts: genaiParts(parts),
    };
    ev.content = content;
  }
  ev.id = e.id;
  ev.invocationId = e.invocation_id ?? '';
  if (e.author !== null && e.author !== undefined) ev.author = e.author;
  else if (!(adk && typeof adk === 'object')) ev.author = e.role === 'user' ? 'user' : e.role;
  if (e.branch !== null && e.branch !== undefined) ev.branch = e.branch;
  ev.actions = adkActions(e.actions);
  if (typeof ev.timestamp !== 'number') ev.timestamp = ts;
  return ev as unknown as Event;
}
