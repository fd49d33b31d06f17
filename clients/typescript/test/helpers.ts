// SPDX-License-Identifier: MIT
// What the tests share: the memd they run against (MEMD_URL, started by
// tests/clients/typescript_test.sh), a client of it, and fresh names so
// that tests never see each other's sessions.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MemdClient, type MemdClientOptions, uuidv7 } from '../src/index.js';

/** The package's root (dist/test/.. /..). */
export const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** memd's URL: the server the test script started. */
export function memdUrl(): string {
  const url = process.env.MEMD_URL;
  if (!url) throw new Error('MEMD_URL is not set: run the tests with tests/clients/typescript_test.sh');
  return url;
}

/** A client of the test's memd. */
export function client(options: Partial<MemdClientOptions> = {}): MemdClient {
  return new MemdClient({ baseUrl: memdUrl(), ...options });
}

/** A name no other test uses (an app, a user, a session id). */
export function fresh(prefix: string): string {
  return `${prefix}-${uuidv7()}`;
}

/** api/openapi.yaml: $MEMD_OPENAPI, else the source tree's. */
export function specText(): string {
  const file = process.env.MEMD_OPENAPI ?? path.resolve(packageRoot, '../../api/openapi.yaml');
  return fs.readFileSync(file, 'utf8');
}
