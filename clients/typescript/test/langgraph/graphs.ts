// SPDX-License-Identifier: MIT
// The LangGraph graphs the MemdSaver tests and the checkpoint benchmark
// run: one that asks a human (interrupt()) before its last step, one with
// a step that waits until told to go on (so that its process can be killed
// there, after its checkpoint is in memd), and a chain of n steps.

import fs from 'node:fs';
import { Annotation, END, START, StateGraph, interrupt } from '@langchain/langgraph';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

/** The state of every graph here: the steps that ran, in order, and a count. */
export const State = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
});

/** plan -> ask (interrupt(): the answer of the human) -> act. */
export function approvalGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(State)
    .addNode('plan', () => ({ log: ['plan'], n: 1 }))
    .addNode('ask', () => {
      const answer = interrupt({ question: 'go ahead?' }) as string;
      return { log: [`answer:${answer}`], n: 1 };
    })
    .addNode('act', () => ({ log: ['act'], n: 1 }))
    .addEdge(START, 'plan')
    .addEdge('plan', 'ask')
    .addEdge('ask', 'act')
    .addEdge('act', END)
    .compile({ checkpointer });
}

/* How often the waiting step looks for its file (ms). */
const GO_POLL_MS = 20;

/** one -> two -> wait (until the file `go` exists) -> three. */
export function waitingGraph(checkpointer: BaseCheckpointSaver, go: string) {
  return new StateGraph(State)
    .addNode('one', () => ({ log: ['one'], n: 1 }))
    .addNode('two', () => ({ log: ['two'], n: 1 }))
    .addNode('wait', async () => {
      while (!fs.existsSync(go)) await new Promise((r) => setTimeout(r, GO_POLL_MS));
      return { log: ['wait'], n: 1 };
    })
    .addNode('three', () => ({ log: ['three'], n: 1 }))
    .addEdge(START, 'one')
    .addEdge('one', 'two')
    .addEdge('two', 'wait')
    .addEdge('wait', 'three')
    .addEdge('three', END)
    .compile({ checkpointer });
}

/** A chain of `steps` nodes, each appending its name and adding 1. */
export function chainGraph(checkpointer: BaseCheckpointSaver, steps: number) {
  // Typed loosely: StateGraph's node names are a type parameter that a loop
  // cannot grow.
  let g: any = new StateGraph(State);
  for (let i = 0; i < steps; i++) g = g.addNode(`s${i}`, () => ({ log: [`s${i}`], n: 1 }));
  g = g.addEdge(START, 's0');
  for (let i = 1; i < steps; i++) g = g.addEdge(`s${i - 1}`, `s${i}`);
  g = g.addEdge(`s${steps - 1}`, END);
  return g.compile({ checkpointer }) as ReturnType<typeof approvalGraph>;
}
