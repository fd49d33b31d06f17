// SPDX-License-Identifier: MIT
// Messages of every shape through a real memd: PUT them as a session's
// transcript, read them back (GET messages?format=openai, the context in
// that format), append more (POST), replace them (PUT again), and check
// each answer equals what went in. The answers are written as TypeScript
// (argv[3]) for tsc to check against the openai package's types.
//
// usage: node messages_test.js BASE_URL ANSWERS_TS
import { strict as assert } from "node:assert";
import { writeFileSync } from "node:fs";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { more, transcript } from "./fixtures.js";

const [base, answersPath] = process.argv.slice(2);
if (!base || !answersPath) throw new Error("usage: messages_test.js BASE_URL ANSWERS_TS");
const session = `${base}/v1/apps/openai-types/users/u1/sessions/s1`;

interface MessagesAnswer {
  format: "openai";
  messages: ChatCompletionMessageParam[];
}

async function call(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.headers = { "content-type": "application/json" };
    init.body = JSON.stringify(body);
  }
  const res = await fetch(session + path, init);
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

// A response message pushed back as it came is given back as a request's
// assistant message: without its annotations (memd keeps them in the event).
function asRequest(messages: ChatCompletionMessageParam[]): ChatCompletionMessageParam[] {
  return messages.map((m) => {
    const { annotations, ...rest } = m as ChatCompletionMessageParam & { annotations?: unknown };
    void annotations;
    return rest as ChatCompletionMessageParam;
  });
}

const answers: { what: string; answer: unknown }[] = [];
let passed = 0;

function check(what: string, answer: Record<string, unknown>, want: ChatCompletionMessageParam[]): void {
  answers.push({ what, answer });
  assert.equal(answer["format"], "openai", `${what}: format`);
  assert.deepStrictEqual(answer["messages"], asRequest(want), `${what}: the messages differ from what went in`);
  passed++;
}

const put = await call("PUT", "/messages", { messages: transcript });
assert.equal(put["created"], true, "the first PUT creates the session");
check("GET messages after PUT", await call("GET", "/messages?format=openai"), transcript);
check("GET context after PUT", await call("GET", "/context?format=openai"), transcript);

await call("POST", "/messages", { messages: more });
check("GET messages after POST", await call("GET", "/messages?format=openai"), [...transcript, ...more]);

const again = await call("PUT", "/messages", { messages: more });
assert.equal(again["created"], false, "the second PUT replaces");
check("GET messages after the second PUT", await call("GET", "/messages?format=openai"), more);
check("GET context after the second PUT", await call("GET", "/context?format=openai"), more);

// Bad messages: a 400 naming the message and the field, and nothing
// written.
async function refused(body: unknown, what: string): Promise<void> {
  const res = await fetch(session + "/messages", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = (await res.json()) as { error?: { message?: string } };
  assert.equal(res.status, 400, `${what}: status`);
  assert.ok(answer.error?.message?.includes(what), `${what}: not in ${JSON.stringify(answer)}`);
  passed++;
}
await refused({ messages: [...more, { role: "tool", content: "r" }] }, "messages[2].tool_call_id: required");
await refused(
  { messages: [{ role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: {} } }] }] },
  "messages[0].tool_calls[0].function.arguments: must be a string",
);
await refused(
  { messages: [{ role: "user", content: [{ type: "refusal", refusal: "x" }] }] },
  "messages[0].content[0].type: 'refusal' is not a content part of a user message",
);
check("GET messages after the refused appends", await call("GET", "/messages?format=openai"), more);

// What memd answered, for tsc: each answer must be a MessagesAnswer (a
// context answer also has strategy and tokens), and its messages what
// chat.completions.create takes.
const lines = [
  "// Written by messages_test.js: memd's answers, checked by tsc.",
  'import type OpenAI from "openai";',
  'import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";',
  "interface MessagesAnswer {",
  '  format: "openai";',
  "  messages: ChatCompletionMessageParam[];",
  "  strategy?: string;",
  "  tokens?: number;",
  "}",
  ...answers.map(
    (a, i) => `// ${a.what}\nexport const answer${i}: MessagesAnswer = ${JSON.stringify(a.answer, null, 1)};`,
  ),
  "export const requests: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming[] = [",
  ...answers.map((_, i) => `  { model: "any", messages: answer${i}.messages },`),
  "];",
  "",
];
writeFileSync(answersPath, lines.join("\n"));
console.log(`${passed} passed, 0 failed`);
