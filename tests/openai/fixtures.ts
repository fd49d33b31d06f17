// SPDX-License-Identifier: MIT
// Every message shape of the chat completions API, as the openai
// package's types spell them: tsc checks each against
// ChatCompletionMessageParam, so a fixture that the package would not send
// does not compile.
import type {
  ChatCompletionMessage,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";

// A response message as a client pushes it back into its history.
const response: ChatCompletionMessage = {
  role: "assistant",
  content: "It is 18C in Paris and 21C in Rome.",
  refusal: null,
  annotations: [],
};

const refusalResponse: ChatCompletionMessage = {
  role: "assistant",
  content: null,
  refusal: "I can't help with that.",
};

export const transcript: ChatCompletionMessageParam[] = [
  { role: "developer", content: "Answer briefly." },
  { role: "developer", content: [{ type: "text", text: "Use metric units." }], name: "ops" },
  { role: "system", content: "You are a travel assistant." },
  {
    role: "system",
    content: [
      { type: "text", text: "Tools: weather, sql." },
      { type: "text", text: "Long policy.", prompt_cache_breakpoint: { mode: "explicit", ttl: "12h" } },
    ],
    name: "policy",
  },
  { role: "user", content: "Hello!" },
  { role: "user", content: "I'm Alice.", name: "alice" },
  { role: "user", content: [{ type: "text", text: "Only one part." }] },
  {
    role: "user",
    content: [
      { type: "text", text: "What is in these?" },
      { type: "image_url", image_url: { url: "https://example.com/sky.png", detail: "high" } },
      { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
      { type: "image_url", image_url: { url: "https://example.com/a.jpg", detail: "original" },
        prompt_cache_breakpoint: { mode: "explicit" } },
      { type: "input_audio", input_audio: { data: "UklGRiQAAABXQVZF", format: "wav" } },
      { type: "input_audio", input_audio: { data: "SUQzBAAAAAAA", format: "mp3" } },
      { type: "file", file: { file_id: "file-abc123" } },
      { type: "file", file: { file_data: "data:application/pdf;base64,JVBERi0=", filename: "a.pdf" } },
    ],
  },
  { role: "assistant", content: "Hi Alice." },
  { role: "assistant", content: "Named.", name: "helper" },
  { role: "assistant", content: [{ type: "text", text: "Part one." }, { type: "refusal", refusal: "Not that." }] },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "weather", arguments: "{\"city\":\"Paris\"}" } },
      { id: "call_2", type: "function",
        function: { name: "weather", arguments: "{\"city\": \"Rome\", \"unit\": \"C\"}" } },
      { id: "call_3", type: "custom", custom: { name: "sql", input: "SELECT 1" } },
    ],
  },
  { role: "tool", tool_call_id: "call_1", content: "18C" },
  { role: "tool", tool_call_id: "call_2", content: [{ type: "text", text: "21" }, { type: "text", text: "C" }] },
  { role: "tool", tool_call_id: "call_3", content: "1" },
  response,
  {
    role: "assistant",
    tool_calls: [{ id: "call_4", type: "function", function: { name: "book", arguments: "{\"seats\":2,\"when\":\"19:00\"}" } }],
  },
  { role: "tool", tool_call_id: "call_4", content: [{ type: "text", text: "booked" }] },
  { role: "assistant", content: "Booked.", audio: { id: "audio_abc" } },
  refusalResponse,
  { role: "assistant", content: null, function_call: { name: "legacy", arguments: "{\"x\":1}" } },
  { role: "function", name: "legacy", content: "done" },
  { role: "function", name: "legacy", content: null },
  { role: "assistant", content: "" },
];

// A second batch, appended after the transcript.
export const more: ChatCompletionMessageParam[] = [
  { role: "user", content: "Thanks, and tomorrow?" },
  { role: "assistant", content: "Sunny." },
];
