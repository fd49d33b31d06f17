// SPDX-License-Identifier: MIT
// The transport's retries, timeouts and aborts against a stand-in: a small
// local node:http server that answers what memd cannot be made to answer
// on demand (a 503 with Retry-After, a dropped connection, a stall). Each
// test scripts the stand-in's answers, one a request, and checks what the
// client did and how many requests reached the server.

import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { MemdClient, MemdError, RETRY_AFTER_MAX_MS } from '../src/index.js';
import { retryAfterMs } from '../src/transport.js';

/** What the stand-in does with one request. */
type Script = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A stand-in HTTP server on a free loopback port. The nth request gets
 * the nth script (the last repeats); `seen` records every request as it
 * arrives, and `arrived(n)` resolves once n requests have.
 */
class StandIn {
  readonly seen: Seen[] = [];
  private waiters: { n: number; resolve: () => void }[] = [];
  private server: http.Server;
  url = '';

  constructor(private scripts: Script[]) {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        this.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        const script = this.scripts[Math.min(this.seen.length, this.scripts.length) - 1];
        script(req, res, body);
        this.waiters = this.waiters.filter((w) => {
          if (this.seen.length >= w.n) w.resolve();
          return this.seen.length < w.n;
        });
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    standIns.push(this);
    return this;
  }

  arrived(n: number): Promise<void> {
    if (this.seen.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const standIns: StandIn[] = [];
after(async () => {
  await Promise.all(standIns.map((s) => s.close()));
});

/* Scripts. */
const json = (status: number, body: unknown, headers: Record<string, string> = {}): Script => (_req, res) => {
  res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-Id': String(_req.headers['x-request-id']), ...headers });
  res.end(JSON.stringify(body));
};
const unavailable = (retryAfter: string): Script =>
  json(503, { error: { code: 'unavailable', message: 'the store is down', retryable: true } }, { 'Retry-After': retryAfter });
const drop: Script = (req) => req.socket.destroy();
const stall: Script = () => {};
const session = { id: 's1', app: 'a', user: 'u', version: 0 };
const ok: Script = json(200, session);

/* A client of the stand-in whose own backoff is next to nothing, so that a
 * wait the test sees is Retry-After's. */
function clientOf(s: StandIn, options: Partial<ConstructorParameters<typeof MemdClient>[0]> = {}): MemdClient {
  return new MemdClient({ baseUrl: s.url, retryBaseMs: 1, retryMaxMs: 1, ...options });
}

function isError(code: string, status: number) {
  return (e: unknown) => {
    assert.ok(e instanceof MemdError, `not a MemdError: ${String(e)}`);
    assert.equal(e.code, code);
    assert.equal(e.status, status);
    return true;
  };
}

const P = { app: 'a', user: 'u', sid: 's1' };

test('a 503 with Retry-After is retried after Retry-After, then succeeds', async () => {
  const s = await new StandIn([unavailable('1'), ok]).start();
  const started = Date.now();
  const got = await clientOf(s).getSession(P);
  assert.equal(got.id, 's1');
  assert.equal(s.seen.length, 2);
  /* The backoff alone would have waited under 1 ms: the second attempt
   * came after the 1 s Retry-After asked for. */
  assert.ok(Date.now() - started >= 950, `retried after ${Date.now() - started} ms`);
  /* One request id for both attempts. */
  assert.equal(s.seen[0].headers['x-request-id'], s.seen[1].headers['x-request-id']);
});

test('a 503 is retried for a write too (memd wrote nothing), and the last 503 is the error', async () => {
  const s = await new StandIn([unavailable('0')]).start();
  await assert.rejects(clientOf(s, { retries: 2 }).patchState(P, { x: 1 }), (e: unknown) => {
    isError('unavailable', 503)(e);
    const err = e as MemdError;
    assert.equal(err.retryable, true);
    assert.equal(err.message, 'the store is down');
    assert.equal(err.requestId, s.seen[0].headers['x-request-id']);
    return true;
  });
  assert.equal(s.seen.length, 3);
  assert.deepEqual(s.seen.map((r) => r.body), ['{"x":1}', '{"x":1}', '{"x":1}']);
});

test('a 429 with an HTTP-date Retry-After is retried', async () => {
  const s = await new StandIn([json(429, { error: { code: 'unavailable', message: 'slow down', retryable: true } },
    { 'Retry-After': new Date(Date.now() - 1000).toUTCString() }), ok]).start();
  assert.equal((await clientOf(s).getSession(P)).id, 's1');
  assert.equal(s.seen.length, 2);
});

test('Retry-After: delta-seconds, HTTP dates, capped, unreadable', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(retryAfterMs('3', now), 3000);
  assert.equal(retryAfterMs(' 0 ', now), 0);
  assert.equal(retryAfterMs('Thu, 01 Jan 2026 00:00:02 GMT', now), 2000);
  assert.equal(retryAfterMs('Wed, 31 Dec 2025 23:59:00 GMT', now), 0);
  assert.equal(retryAfterMs('86400', now), RETRY_AFTER_MAX_MS);
  assert.equal(retryAfterMs('soon', now), undefined);
  assert.equal(retryAfterMs(null, now), undefined);
});

test('a dropped connection is retried for a read', async () => {
  const s = await new StandIn([drop, ok]).start();
  assert.equal((await clientOf(s).getSession(P)).id, 's1');
  assert.equal(s.seen.length, 2);
});

test('a dropped connection is not retried for a write that is not idempotent', async () => {
  const s = await new StandIn([drop, ok]).start();
  await assert.rejects(clientOf(s).patchState(P, { x: 1 }), (e: unknown) => {
    isError('network', 0)(e);
    assert.equal((e as MemdError).retryable, false);
    assert.ok((e as MemdError).requestId);
    return true;
  });
  assert.equal(s.seen.length, 1);
});

test('a dropped connection is retried for appendEvents, with the same event ids', async () => {
  const s = await new StandIn([drop, json(200, { version: 1, seqs: [1], replayed: true })]).start();
  const r = await clientOf(s).appendEvents(P, { events: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.replayed, true);
  assert.equal(s.seen.length, 2);
  const ids = s.seen.map((x) => JSON.parse(x.body).events[0].id as string);
  assert.match(ids[0], /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(ids[0], ids[1]);
});

test('every attempt dropped: MemdError network after retries + 1 attempts', async () => {
  const s = await new StandIn([drop]).start();
  await assert.rejects(clientOf(s, { retries: 2 }).getSession(P), isError('network', 0));
  assert.equal(s.seen.length, 3);
});

test('a stall hits timeoutMs: MemdError timeout, each attempt timed', async () => {
  const s = await new StandIn([stall]).start();
  await assert.rejects(clientOf(s, { timeoutMs: 100, retries: 1 }).getSession(P), (e: unknown) => {
    isError('timeout', 0)(e);
    assert.match((e as MemdError).message, /within 100 ms/);
    return true;
  });
  assert.equal(s.seen.length, 2);
});

test('a stall in the middle of the body times out too; the per-call timeoutMs wins', async () => {
  const midBody: Script = (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.write('{"id": "s1", ');
  };
  const s = await new StandIn([midBody]).start();
  await assert.rejects(clientOf(s, { timeoutMs: 60_000, retries: 0 }).getSession(P, { timeoutMs: 100 }),
    isError('timeout', 0));
});

test('an AbortSignal stops the call at once, without retries', async () => {
  const s = await new StandIn([stall]).start();
  const controller = new AbortController();
  const call = clientOf(s, { retries: 3 }).getSession(P, { signal: controller.signal });
  await s.arrived(1);
  controller.abort();
  await assert.rejects(call, (e: unknown) => {
    isError('aborted', 0)(e);
    assert.equal((e as MemdError).retryable, false);
    return true;
  });
  assert.equal(s.seen.length, 1);
});

test('an AbortSignal stops the wait for Retry-After', async () => {
  const s = await new StandIn([unavailable('50'), ok]).start();
  const controller = new AbortController();
  /* A fetch that reads the 503 whole before handing it on, and says so:
   * the abort then comes while the client waits the 50 s. */
  let answered!: () => void;
  const got503 = new Promise<void>((resolve) => { answered = resolve; });
  const reading: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const copy = new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers });
    answered();
    return copy;
  };
  const call = clientOf(s, { fetch: reading }).getSession(P, { signal: controller.signal });
  await got503;
  controller.abort();
  await assert.rejects(call, isError('aborted', 0));
  assert.equal(s.seen.length, 1);
});

test('an aborted signal sends nothing', async () => {
  const s = await new StandIn([ok]).start();
  await assert.rejects(clientOf(s).getSession(P, { signal: AbortSignal.abort() }), isError('aborted', 0));
  assert.equal(s.seen.length, 0);
});

test('an answer that is not memd\'s JSON error still is a MemdError with its status', async () => {
  const html: Script = (_req, res) => {
    res.writeHead(400, { 'Content-Type': 'text/html' });
    res.end('<html><body>Bad request.</body></html>');
  };
  const s = await new StandIn([html]).start();
  await assert.rejects(clientOf(s).getSession(P), (e: unknown) => {
    isError('invalid_request', 400)(e);
    assert.match((e as MemdError).message, /Bad request/);
    return true;
  });
});

test('apiKey, headers, path encoding, query values, If-Match', async () => {
  const s = await new StandIn([json(204, {}), json(200, { id: 'm' })]).start();
  const memd = clientOf(s, { apiKey: 'k1', headers: { 'X-Extra': 'e' } });
  await memd.deleteMemory({ app: 'a b', user: 'ü/x', mid: 'm', version: 3 }, { ifMatch: 3 });
  await memd.listEvents({ app: 'a', user: 'u', sid: 's', after_seq: 2, include_text: true, roles: 'user+x' });
  assert.equal(s.seen[0].method, 'DELETE');
  assert.equal(s.seen[0].url, '/v1/apps/a%20b/users/%C3%BC%2Fx/memories/m?version=3');
  assert.equal(s.seen[0].headers['authorization'], 'Bearer k1');
  assert.equal(s.seen[0].headers['x-extra'], 'e');
  assert.equal(s.seen[0].headers['if-match'], '"3"');
  assert.equal(s.seen[1].url, '/v1/apps/a/users/u/sessions/s/events?after_seq=2&include_text=true&roles=user%2Bx');
});
