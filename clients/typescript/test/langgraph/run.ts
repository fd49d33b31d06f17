// SPDX-License-Identifier: MIT
// One process of the MemdSaver graph tests: runs a graph of ./graphs.ts on
// a thread with MemdSaver and prints the state it ended with as JSON.
// Usage: node run.js MEMD_URL APP USER THREAD GRAPH ACTION [ARG]
//   GRAPH approval: ACTION start | resume ANSWER (Command({resume: ANSWER}))
//   GRAPH waiting:  ACTION start GO_FILE | continue GO_FILE (invoke(null))

import { Command } from '@langchain/langgraph';
import { MemdSaver } from '../../src/langgraph.js';
import { approvalGraph, waitingGraph } from './graphs.js';

const [baseUrl, app, user, thread, graph, action, arg] = process.argv.slice(2);
if (!baseUrl || !app || !user || !thread || !graph || !action) {
  console.error('usage: run.js MEMD_URL APP USER THREAD GRAPH ACTION [ARG]');
  process.exit(2);
}
const saver = new MemdSaver({ baseUrl, app, user });
const config = { configurable: { thread_id: thread } };
let state: unknown;
if (graph === 'approval') {
  const g = approvalGraph(saver);
  state = action === 'start' ? await g.invoke({ log: [] }, config) : await g.invoke(new Command({ resume: arg }), config);
} else if (graph === 'waiting') {
  const g = waitingGraph(saver, arg);
  state = await g.invoke(action === 'start' ? { log: [] } : null, config);
} else {
  console.error(`run.js: no graph ${graph}`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(state));
