// SPDX-License-Identifier: MIT
// The conversation the ADK tests run: an LlmAgent whose model is a
// scripted BaseLlm (it replays fixed LlmResponses, and checks what each
// request carries), with a FunctionTool that writes state (a plain key,
// an app: key, a user: key, a temp: key) and saves two artifacts (one of
// the session, one of the user). The same script runs on memd's services
// and on ADK's in-memory ones, and its second half in another process.

import {
  BaseLlm,
  FunctionTool,
  LlmAgent,
  Runner,
  type BaseArtifactService,
  type BaseLlmConnection,
  type BaseMemoryService,
  type BaseSessionService,
  type Event,
  type LlmRequest,
  type LlmResponse,
} from '@google/adk';
import { FinishReason, Type, type Content } from '@google/genai';

export const APP = 'adk-demo';
export const USER = 'alice';

/** A model's step: what it answers a request (it may check the request). */
export type Step = (req: LlmRequest) => LlmResponse;

/** A BaseLlm that answers each request with the next step of a script. */
export class ScriptedLlm extends BaseLlm {
  private next = 0;
  readonly requests: LlmRequest[] = [];

  constructor(private readonly steps: Step[]) {
    super({ model: 'scripted' });
  }

  async *generateContentAsync(req: LlmRequest): AsyncGenerator<LlmResponse, void> {
    const step = this.steps[this.next++];
    if (!step) throw new Error(`ScriptedLlm: request ${this.next} is beyond the script`);
    this.requests.push(req);
    yield step(req);
  }

  async connect(): Promise<BaseLlmConnection> {
    throw new Error('ScriptedLlm: no live connections');
  }
}

/** The text of every content of a request, joined. */
export function requestText(req: LlmRequest): string {
  return (req.contents ?? [])
    .flatMap((c) => c.parts ?? [])
    .map((p) => p.text ?? '')
    .join('\n');
}

/** The system instruction of a request as text. */
export function instructionText(req: LlmRequest): string {
  const si = req.config?.systemInstruction as Content | string | undefined;
  if (!si) return '';
  if (typeof si === 'string') return si;
  return (si.parts ?? []).map((p) => p.text ?? '').join('\n');
}

/** The tool: notes the user's colour in state (plain, app:, user: and
 * temp: keys) and saves a session artifact and a user: artifact. */
export function noteTool(): FunctionTool<undefined> {
  return new FunctionTool({
    name: 'note_preference',
    description: "Notes the user's favourite colour.",
    parameters: {
      type: Type.OBJECT,
      properties: { colour: { type: Type.STRING } },
      required: ['colour'],
    },
    execute: async (input: unknown, ctx) => {
      const { colour } = input as { colour: string };
      ctx!.state.set('colour', colour);
      ctx!.state.set('app:theme', 'dark');
      ctx!.state.set('user:language', 'en');
      ctx!.state.set('temp:scratch', `draft ${colour}`);
      const notes = await ctx!.saveArtifact('notes.txt', { text: `favourite colour: ${colour}` });
      const profile = await ctx!.saveArtifact('user:profile.json', {
        inlineData: { data: btoa(JSON.stringify({ colour })), mimeType: 'application/json' },
      });
      return { saved: true, notes, profile };
    },
  }) as FunctionTool<undefined>;
}

/** A tool that searches the user's memory (ADK's memory service, through
 * the tool context) and answers the texts it found. */
export function recallTool(): FunctionTool<any> {
  return new FunctionTool({
    name: 'recall',
    description: 'Searches what the user said before.',
    parameters: { type: Type.OBJECT, properties: { query: { type: Type.STRING } }, required: ['query'] },
    execute: async (input: unknown, ctx) => {
      const found = await ctx!.searchMemory((input as { query: string }).query);
      return { texts: found.memories.map((m) => m.content.parts?.[0]?.text ?? '') };
    },
  });
}

/** The model of a turn that recalls: a call of recall, then an answer. */
export function recallSteps(): Step[] {
  return [
    () => ({
      content: { role: 'model', parts: [{ functionCall: { id: 'call-r', name: 'recall', args: { query: 'favourite colour' } } }] },
    }),
    () => ({ content: { role: 'model', parts: [{ text: 'You told me before: blue.' }] }, turnComplete: true }),
  ];
}

/** The first turns' model: a function call, its summary, an answer. */
export function firstSteps(): Step[] {
  return [
    () => ({
      content: {
        role: 'model',
        parts: [{ functionCall: { id: 'call-1', name: 'note_preference', args: { colour: 'blue' } } }],
      },
      usageMetadata: { promptTokenCount: 40, candidatesTokenCount: 6, totalTokenCount: 46 },
    }),
    (req) => {
      if (!requestText(req).includes('My favourite colour is blue'))
        throw new Error('ScriptedLlm: the second request lacks the user message');
      return {
        content: { role: 'model', parts: [{ text: 'Noted: your favourite colour is blue.' }] },
        turnComplete: true,
      };
    },
    () => ({
      content: { role: 'model', parts: [{ text: 'I will remember that you are allergic to peanuts.' }] },
      turnComplete: true,
      finishReason: FinishReason.STOP,
    }),
  ];
}

/** The last turn's model: checks that the request carries the earlier
 * turns and the state, and answers from them. */
export function lastSteps(): Step[] {
  return [
    (req) => {
      const text = requestText(req);
      for (const want of ['My favourite colour is blue', 'allergic to peanuts', 'Noted: your favourite colour is blue.'])
        if (!text.includes(want)) throw new Error(`ScriptedLlm: the request lacks the history: ${want}`);
      const si = instructionText(req);
      if (!si.includes('favourite colour is blue') || !si.includes('language en'))
        throw new Error(`ScriptedLlm: the instruction lacks the state: ${si}`);
      return { content: { role: 'model', parts: [{ text: 'Your favourite colour is blue.' }] }, turnComplete: true };
    },
  ];
}

export interface Services {
  sessionService: BaseSessionService;
  artifactService?: BaseArtifactService;
  memoryService?: BaseMemoryService;
}

/** A Runner of the agent on the services, with a model scripted by steps
 * and these tools. */
export function runner(services: Services, steps: Step[], tools: FunctionTool<any>[] = [noteTool()]): Runner {
  const agent = new LlmAgent({
    name: 'helper',
    model: new ScriptedLlm(steps),
    instruction: "You help. The user's favourite colour is {colour?}; language {user:language?}.",
    tools,
  });
  return new Runner({ appName: APP, agent, ...services });
}

/** Runs one turn; the events the runner yields. */
export async function turn(
  r: Runner,
  sessionId: string,
  text: string,
  stateDelta?: Record<string, unknown>,
): Promise<Event[]> {
  const out: Event[] = [];
  for await (const e of r.runAsync({
    userId: USER,
    sessionId,
    newMessage: { role: 'user', parts: [{ text }] },
    ...(stateDelta ? { stateDelta } : {}),
  }))
    out.push(e);
  return out;
}

/** The first two turns (the memd run and the in-memory run alike). */
export async function firstTurns(r: Runner, sessionId: string): Promise<Event[]> {
  const a = await turn(r, sessionId, 'My favourite colour is blue; please note it.');
  const b = await turn(r, sessionId, 'Remember that I am allergic to peanuts.', {
    mood: 'curious',
    'temp:request': 'r-2',
  });
  return [...a, ...b];
}

/** The last turn. */
export function lastTurn(r: Runner, sessionId: string): Promise<Event[]> {
  return turn(r, sessionId, 'What is my favourite colour?');
}
