// SPDX-License-Identifier: MIT
// LangGraph's own checkpointer conformance suite
// (@langchain/langgraph-checkpoint-validation, as published) against
// MemdSaver on a real memd serve. Each checkpointer the suite creates is a
// fresh memd user (its list() without a thread lists that user's threads
// only), deleted with everything it holds when the suite is done with it.
// Usage: MEMD_URL=... vitest run --globals (tests/clients/langgraph_test.sh runs it).

import { validate } from '@langchain/langgraph-checkpoint-validation';
import { MemdClient, uuidv7 } from '../../src/index.js';
import { MemdSaver } from '../../src/langgraph.js';

const baseUrl = process.env.MEMD_URL;
if (!baseUrl) throw new Error('MEMD_URL is not set: run tests/clients/langgraph_test.sh');
const client = new MemdClient({ baseUrl });
const APP = 'langgraph-validation';

validate<MemdSaver>({
  checkpointerName: 'MemdSaver',
  createCheckpointer: () => new MemdSaver({ client, app: APP, user: `v-${uuidv7()}` }),
  destroyCheckpointer: async (saver) => {
    await client.deleteUser({ app: APP, user: saver.user });
  },
});
