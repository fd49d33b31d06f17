// SPDX-License-Identifier: MIT
// The second process of the ADK test: a new Runner on memd's services
// continues a session the first process's Runner left in memd (its model
// checks the request carries the earlier turns and the state), and prints
// the events it yielded and the session's state as JSON.
// Usage: node continue.js MEMD_URL SESSION_ID

import { MemdClient } from '../../src/index.js';
import { MemdArtifactService, MemdMemoryService, MemdSessionService } from '../../src/adk/index.js';
import { APP, USER, lastSteps, lastTurn, runner } from './script.js';

const [baseUrl, sessionId] = process.argv.slice(2);
if (!baseUrl || !sessionId) {
  console.error('usage: continue.js MEMD_URL SESSION_ID');
  process.exit(2);
}
const client = new MemdClient({ baseUrl });
const sessionService = new MemdSessionService({ client });
const r = runner(
  { sessionService, artifactService: new MemdArtifactService({ client }), memoryService: new MemdMemoryService({ client }) },
  lastSteps(),
);
const events = await lastTurn(r, sessionId);
const session = await sessionService.getSession({ appName: APP, userId: USER, sessionId });
process.stdout.write(JSON.stringify({ events, state: session?.state }));
