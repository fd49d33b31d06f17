// SPDX-License-Identifier: MIT
// uuidv7: the ids the client fills in (RFC 9562 version 7): their form,
// their time, and that ids made in a burst are distinct and ascending.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { uuidv7 } from '../src/index.js';

const FORM = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('a UUIDv7 carries the time it was made, version 7 and variant 10', () => {
  const before = Date.now();
  const id = uuidv7();
  const after = Date.now();
  assert.match(id, FORM);
  const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
  assert.ok(ms >= before && ms <= after + 1, `${ms} not in [${before}, ${after}]`);
});

test('ids made in a burst are distinct and ascend in the order they were made', () => {
  const ids = Array.from({ length: 20_000 }, () => uuidv7());
  assert.equal(new Set(ids).size, ids.length);
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1] < ids[i], `${ids[i - 1]} !< ${ids[i]}`);
  for (const id of ids) assert.match(id, FORM);
});
