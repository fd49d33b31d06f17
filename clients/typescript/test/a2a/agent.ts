// SPDX-License-Identifier: MIT
// The A2A server the a2a tests run, as @a2a-js/sdk serves an agent: its
// DefaultRequestHandler over a MemdTaskStore, the JSON-RPC transport and
// the agent card on an express app. The agent is a small AgentExecutor
// driven by the first word of the user's message:
//   run TEXT   task (submitted), working, the artifact `result` holding
//              TEXT in capitals, completed (final);
//   hold TEXT  task (submitted), working, then waits until the test
//              releases it (POST /test/release/TASK_ID: then as run) or
//              the task is canceled (canceled, final).
// A follow-up message on a task the agent does not hold (another process
// started it) is the same: `run` finishes it, `hold` holds it again.

import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { AGENT_CARD_PATH, type AgentCard, type Message, type TaskState, type TaskStatusUpdateEvent } from '@a2a-js/sdk';
import {
  DefaultRequestHandler, type AgentExecutor, type ExecutionEventBus, type RequestContext, type TaskStore,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { uuidv7 } from '../../src/index.js';

/** The artifact id the agent writes its answer under. */
export const RESULT_ARTIFACT = 'result';

/** A message of the agent's, in context contextId. */
function agentMessage(taskId: string, contextId: string, text: string): Message {
  return { kind: 'message', role: 'agent', messageId: uuidv7(), parts: [{ kind: 'text', text }], taskId, contextId };
}

/** A status update of taskId to state, with the agent's message text. */
function statusUpdate(taskId: string, contextId: string, state: TaskState, text: string, final: boolean): TaskStatusUpdateEvent {
  return {
    kind: 'status-update', taskId, contextId, final,
    status: { state, message: agentMessage(taskId, contextId, text), timestamp: new Date().toISOString() },
  };
}

/** A held task: how to end its wait, and its context. */
interface Held {
  contextId: string;
  end: (how: 'release' | 'cancel') => void;
}

/** The scripted agent (see the file's head). */
export class ScriptedExecutor implements AgentExecutor {
  readonly #held = new Map<string, Held>();

  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId, userMessage } = ctx;
    const first = userMessage.parts.find((p) => p.kind === 'text');
    const [command = '', ...words] = (first && first.kind === 'text' ? first.text : '').split(' ');
    if (!ctx.task) {
      bus.publish({
        kind: 'task', id: taskId, contextId, history: [userMessage],
        status: { state: 'submitted', timestamp: new Date().toISOString() },
      });
    }
    bus.publish(statusUpdate(taskId, contextId, 'working', `working on ${command}`, false));
    if (command === 'hold') {
      const how = await new Promise<'release' | 'cancel'>((end) => this.#held.set(taskId, { contextId, end }));
      this.#held.delete(taskId);
      if (how === 'cancel') return; // cancelTask published the final state
    }
    bus.publish({
      kind: 'artifact-update', taskId, contextId,
      artifact: { artifactId: RESULT_ARTIFACT, name: 'result.txt', parts: [{ kind: 'text', text: words.join(' ').toUpperCase() }] },
    });
    bus.publish(statusUpdate(taskId, contextId, 'completed', 'done', true));
    bus.finished();
  }

  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    const held = this.#held.get(taskId);
    if (!held) return; // nothing of it runs here: the handler leaves its state as it is
    bus.publish(statusUpdate(taskId, held.contextId, 'canceled', 'canceled on request', true));
    bus.finished();
    held.end('cancel');
  }

  /** Lets a held task finish; false when this process holds no such task. */
  release(taskId: string): boolean {
    const held = this.#held.get(taskId);
    if (!held) return false;
    held.end('release');
    return true;
  }
}

/** A running A2A server. */
export interface A2AServer {
  /** Its base URL (the agent card is under /.well-known/agent-card.json). */
  url: string;
  executor: ScriptedExecutor;
  close(): Promise<void>;
}

/**
 * Serves the scripted agent over store on 127.0.0.1 (a free port), with
 * the SDK's DefaultRequestHandler or the given subclass of it.
 */
export async function startA2AServer(
  store: TaskStore, Handler: typeof DefaultRequestHandler = DefaultRequestHandler,
): Promise<A2AServer> {
  const card: AgentCard = {
    name: 'memd a2a test agent',
    description: 'Runs, holds and finishes tasks whose state lives in memd.',
    protocolVersion: '0.3.0',
    version: '1.0.0',
    url: '', // set once the port is known
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: ['text'],
    defaultOutputModes: ['text'],
    skills: [{ id: 'echo', name: 'Echo', description: 'Answers its words in capitals.', tags: ['test'] }],
  };
  const executor = new ScriptedExecutor();
  const handler = new Handler(card, store, executor);
  const app = express();
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.post('/test/release/:taskId', (req, res) => {
    res.status(executor.release(req.params.taskId) ? 204 : 404).end();
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  card.url = `${url}/a2a/jsonrpc`;
  return {
    url,
    executor,
    close: () => new Promise<void>((resolve, reject) => {
      server.close((err) => (err ? reject(err) : resolve()));
      server.closeAllConnections();
    }),
  };
}
