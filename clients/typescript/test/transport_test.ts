// SPDX-License-Identifier: MIT
// The transport's retries, timeouts and aborts against a stand-in: a small
// local node:http server that answers what memd cannot be made to answer
// on demand (a 503 with Retry-After, a dropped connection, a stall). Each
// test scripts the stand-in's answers, one a request, and checks what the
// client did and how many requests (and connections) reached the server.
// Every such test runs through both transports: node (node:http, the
// default under Node) and fetch.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { MemdClient, MemdError, RETRY_AFTER_MAX_MS } from '../src/index.js';
import { retryAfterMs } from '../src/transport.js';
import { client, packageRoot } from './helpers.js';

/** What the stand-in does with one request. */
type Script = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  raw: Buffer;
  /** The connection it came on (1 for the server's first). */
  connection: number;
}

/**
 * A stand-in HTTP server on a free loopback port (HTTPS with `tls`). The
 * nth request gets the nth script (the last repeats); `seen` records every
 * request as it arrives, and `arrived(n)` resolves once n requests have.
 * `connections` counts the connections it accepted, `open` those still
 * open; `closed(n)` resolves once n have closed.
 */
class StandIn {
  readonly seen: Seen[] = [];
  connections = 0;
  open = 0;
  private closes = 0;
  private waiters: { n: number; resolve: () => void }[] = [];
  private closeWaiters: { n: number; resolve: () => void }[] = [];
  private server: http.Server | https.Server;
  url = '';

  constructor(private scripts: Script[], private tls?: { key: string; cert: string }) {
    const ids = new WeakMap<object, number>();
    const handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const body = raw.toString('utf8');
        this.seen.push({
          method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, raw,
          connection: ids.get(req.socket) ?? 0,
        });
        const script = this.scripts[Math.min(this.seen.length, this.scripts.length) - 1];
        script(req, res, body);
        this.waiters = this.waiters.filter((w) => {
          if (this.seen.length >= w.n) w.resolve();
          return this.seen.length < w.n;
        });
      });
    };
    this.server = tls ? https.createServer(tls, handle) : http.createServer(handle);
    this.server.on(tls ? 'secureConnection' : 'connection', (socket) => {
      ids.set(socket, ++this.connections);
      this.open++;
      socket.on('close', () => {
        this.open--;
        this.closes++;
        this.closeWaiters = this.closeWaiters.filter((w) => {
          if (this.closes >= w.n) w.resolve();
          return this.closes < w.n;
        });
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `${this.tls ? 'https' : 'http'}://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    standIns.push(this);
    return this;
  }

  closed(n: number): Promise<void> {
    if (this.closes >= n) return Promise.resolve();
    return new Promise((resolve) => this.closeWaiters.push({ n, resolve }));
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
/* A TCP reset (RST) rather than a close. */
const reset: Script = (req) => req.socket.resetAndDestroy();
const stall: Script = () => {};
const session = { id: 's1', app: 'a', user: 'u', version: 0 };
const ok: Script = json(200, session);

type ClientOptions = Partial<ConstructorParameters<typeof MemdClient>[0]>;

/* The transports every stand-in test runs through. */
const TRANSPORTS = ['node', 'fetch'] as const;

/* A client of the stand-in through transport whose own backoff is next to
 * nothing, so that a wait the test sees is Retry-After's. */
function clientThrough(transport: 'node' | 'fetch', s: StandIn, options: ClientOptions = {}): MemdClient {
  const memd = new MemdClient({ baseUrl: s.url, retryBaseMs: 1, retryMaxMs: 1, transport, ...options });
  clients.push(memd);
  return memd;
}
const clients: MemdClient[] = [];
after(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

function isError(code: string, status: number) {
  return (e: unknown) => {
    assert.ok(e instanceof MemdError, `not a MemdError: ${String(e)}`);
    assert.equal(e.code, code);
    assert.equal(e.status, status);
    return true;
  };
}

const P = { app: 'a', user: 'u', sid: 's1' };

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
  const call = clientThrough('fetch', s, { fetch: reading }).getSession(P, { signal: controller.signal });
  await got503;
  controller.abort();
  await assert.rejects(call, isError('aborted', 0));
  assert.equal(s.seen.length, 1);
});


for (const transport of TRANSPORTS) {
  const clientOf = (s: StandIn, options: ClientOptions = {}) => clientThrough(transport, s, options);

  test(`${transport}: a 503 with Retry-After is retried after Retry-After, then succeeds`, async () => {
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

  test(`${transport}: a 503 is retried for a write too (memd wrote nothing), and the last 503 is the error`, async () => {
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

  test(`${transport}: a 429 with an HTTP-date Retry-After is retried`, async () => {
    const s = await new StandIn([json(429, { error: { code: 'unavailable', message: 'slow down', retryable: true } },
      { 'Retry-After': new Date(Date.now() - 1000).toUTCString() }), ok]).start();
    assert.equal((await clientOf(s).getSession(P)).id, 's1');
    assert.equal(s.seen.length, 2);
  });

  test(`${transport}: a dropped connection is retried for a read`, async () => {
    const s = await new StandIn([drop, ok]).start();
    assert.equal((await clientOf(s).getSession(P)).id, 's1');
    assert.equal(s.seen.length, 2);
  });

  test(`${transport}: a dropped connection is not retried for a write that is not idempotent`, async () => {
    const s = await new StandIn([drop, ok]).start();
    await assert.rejects(clientOf(s).patchState(P, { x: 1 }), (e: unknown) => {
      isError('network', 0)(e);
      assert.equal((e as MemdError).retryable, false);
      assert.ok((e as MemdError).requestId);
      return true;
    });
    assert.equal(s.seen.length, 1);
  });

  test(`${transport}: a dropped connection is retried for appendEvents, with the same event ids`, async () => {
    const s = await new StandIn([drop, json(200, { version: 1, seqs: [1], replayed: true })]).start();
    const r = await clientOf(s).appendEvents(P, { events: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.replayed, true);
    assert.equal(s.seen.length, 2);
    const ids = s.seen.map((x) => JSON.parse(x.body).events[0].id as string);
    assert.match(ids[0], /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(ids[0], ids[1]);
  });

  test(`${transport}: every attempt dropped: MemdError network after retries + 1 attempts`, async () => {
    const s = await new StandIn([drop]).start();
    await assert.rejects(clientOf(s, { retries: 2 }).getSession(P), isError('network', 0));
    assert.equal(s.seen.length, 3);
  });

  test(`${transport}: a stall hits timeoutMs: MemdError timeout, each attempt timed`, async () => {
    const s = await new StandIn([stall]).start();
    await assert.rejects(clientOf(s, { timeoutMs: 100, retries: 1 }).getSession(P), (e: unknown) => {
      isError('timeout', 0)(e);
      assert.match((e as MemdError).message, /within 100 ms/);
      return true;
    });
    assert.equal(s.seen.length, 2);
  });

  test(`${transport}: a stall in the middle of the body times out too; the per-call timeoutMs wins`, async () => {
    const midBody: Script = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"id": "s1", ');
    };
    const s = await new StandIn([midBody]).start();
    await assert.rejects(clientOf(s, { timeoutMs: 60_000, retries: 0 }).getSession(P, { timeoutMs: 100 }),
      isError('timeout', 0));
  });

  test(`${transport}: an AbortSignal stops the call at once, without retries`, async () => {
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

  test(`${transport}: an aborted signal sends nothing`, async () => {
    const s = await new StandIn([ok]).start();
    await assert.rejects(clientOf(s).getSession(P, { signal: AbortSignal.abort() }), isError('aborted', 0));
    assert.equal(s.seen.length, 0);
  });

  test(`${transport}: an answer that is not memd\'s JSON error still is a MemdError with its status`, async () => {
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

  test(`${transport}: apiKey, headers, path encoding, query values, If-Match`, async () => {
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

  test(`${transport}: a reset connection is retried for a read, not for a write that is not idempotent`, async () => {
    const s = await new StandIn([reset, ok, reset]).start();
    assert.equal((await clientOf(s).getSession(P)).id, 's1');
    assert.equal(s.seen.length, 2);
    await assert.rejects(clientOf(s, { retries: 3 }).patchState(P, { x: 1 }), (e: unknown) => {
      isError('network', 0)(e);
      assert.equal((e as MemdError).retryable, false);
      return true;
    });
    assert.equal(s.seen.length, 3);
  });

  test(`${transport}: a refused connection is MemdError network, retryable for a read only`, async () => {
    /* A port that was just free: nothing listens there. */
    const s = await new StandIn([ok]).start();
    const url = s.url;
    await s.close();
    const memd = new MemdClient({ baseUrl: url, transport, retries: 2, retryBaseMs: 1, retryMaxMs: 1 });
    await assert.rejects(memd.getSession(P), (e: unknown) => {
      isError('network', 0)(e);
      assert.equal((e as MemdError).retryable, true);
      assert.match((e as MemdError).message, /^GET \/v1\/apps\/a\/users\/u\/sessions\/s1: /);
      return true;
    });
    await assert.rejects(memd.patchState(P, { x: 1 }), (e: unknown) => {
      isError('network', 0)(e);
      assert.equal((e as MemdError).retryable, false);
      return true;
    });
  });

  test(`${transport}: a body of several MB goes out and comes back whole`, async () => {
    const big = new Uint8Array(6 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 65536) crypto.getRandomValues(big.subarray(i, i + 65536));
    const bytes: Script = (req, res) => {
      res.writeHead(200, {
        'Content-Type': 'application/x-test', 'X-Memd-Artifact-Version': '7',
        'X-Memd-Artifact-Created': '2026-01-01T00:00:00Z',
      });
      res.end(s.seen[0].raw);
    };
    const s = await new StandIn([json(200, { version: 7 }), bytes]).start();
    const memd = clientOf(s);
    const P2 = { ...P, name: 'big.bin' };
    assert.deepEqual(await memd.putArtifact(P2, big, { contentType: 'application/x-test' }), { version: 7 });
    assert.equal(s.seen[0].headers['content-length'], String(big.length));
    assert.ok(s.seen[0].raw.equals(big), 'the request body arrived changed');
    const got = await memd.getArtifact(P2);
    assert.equal(got.contentType, 'application/x-test');
    assert.equal(got.version, 7);
    assert.equal(got.data.byteLength, big.length);
    assert.equal(got.data.buffer.byteLength, big.length);
    assert.ok(Buffer.from(got.data.buffer, got.data.byteOffset, got.data.byteLength).equals(big), 'the answer arrived changed');
  });
}

test('node: sequential requests go over one kept-alive connection', async () => {
  const s = await new StandIn([ok]).start();
  const memd = clientThrough('node', s);
  assert.equal(memd.transport, 'node');
  for (let i = 0; i < 20; i++) assert.equal((await memd.getSession(P)).id, 's1');
  assert.equal(s.seen.length, 20);
  assert.equal(s.connections, 1);
  assert.deepEqual(new Set(s.seen.map((r) => r.connection)), new Set([1]));
});

test('node: maxConnections bounds the connections under concurrency', async () => {
  const MAX = 3;
  /* The first MAX requests are held until all MAX have arrived (so that
   * they are at once on MAX connections), the rest answered at once. */
  const held: (() => void)[] = [];
  const holding: Script = (req, res) => {
    held.push(() => ok(req, res, ''));
    if (held.length === MAX) for (const answer of held) answer();
  };
  const s = await new StandIn([holding, holding, holding, ok]).start();
  const memd = clientThrough('node', s, { maxConnections: MAX });
  const got = await Promise.all(Array.from({ length: 4 * MAX }, () => memd.getSession(P)));
  assert.equal(got.length, 4 * MAX);
  assert.equal(s.seen.length, 4 * MAX);
  assert.equal(s.connections, MAX);
});

test('node: close() closes the kept-alive connection; a later call opens another', async () => {
  const s = await new StandIn([ok]).start();
  const memd = clientThrough('node', s);
  await memd.getSession(P);
  assert.equal(s.open, 1);
  await memd.close();
  await s.closed(1);
  assert.equal(s.open, 0);
  await memd.getSession(P);
  assert.equal(s.connections, 2);
  assert.deepEqual(s.seen.map((r) => r.connection), [1, 2]);
});

test('the transport: node by default under Node, fetch when a fetch is given; bad options are TypeErrors', () => {
  assert.equal(client().transport, 'node');
  assert.equal(client({ transport: 'auto' }).transport, 'node');
  assert.equal(client({ transport: 'fetch' }).transport, 'fetch');
  assert.equal(client({ fetch: (input, init) => fetch(input, init) }).transport, 'fetch');
  assert.throws(() => client({ transport: 'node', fetch }), TypeError);
  assert.throws(() => client({ transport: 'tcp' as 'node' }), TypeError);
  assert.throws(() => client({ maxConnections: 0 }), TypeError);
  assert.throws(() => client({ maxConnections: 1.5 }), TypeError);
  assert.throws(() => new MemdClient({ baseUrl: 'ftp://127.0.0.1:21' }), TypeError);
});

/* Runs a node ES module (text) in a child process with env added, and
 * resolves to its exit code and output once it has exited, or kills it
 * and rejects when it has not exited within CHILD_MAX_MS. */
const CHILD_MAX_MS = 60_000;
function runChild(source: string, env: Record<string, string> = {}): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', source], {
      env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { err += c.toString(); });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the child process did not exit within ${CHILD_MAX_MS} ms; stdout: ${out}; stderr: ${err}`));
    }, CHILD_MAX_MS);
    /* 'close': exited, and its output read to the end. */
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

const INDEX_URL = JSON.stringify(new URL(`file://${path.join(packageRoot, 'dist/src/index.js')}`).href);

test('node: a process that made a request exits by itself, its kept-alive connection still open', async () => {
  const s = await new StandIn([ok]).start();
  /* At exit, the child's connection to the stand-in is open: the process
   * ended with it idle in the Agent (unref'd), not after something closed
   * it (the Agent's idle timeout, or the server's keep-alive timeout). */
  const r = await runChild(`
    import dc from 'node:diagnostics_channel';
    const { MemdClient } = await import(${INDEX_URL});
    const sockets = [];
    dc.subscribe('net.client.socket', ({ socket }) => sockets.push(socket));
    const memd = new MemdClient({ baseUrl: ${JSON.stringify(s.url)} });
    const got = await memd.getSession({ app: 'a', user: 'u', sid: 's1' });
    process.on('exit', () => console.log(JSON.stringify({
      id: got.id, transport: memd.transport, sockets: sockets.length, open: sockets.filter((x) => !x.destroyed).length,
    })));
  `);
  assert.equal(r.code, 0, r.err);
  assert.deepEqual(JSON.parse(r.out), { id: 's1', transport: 'node', sockets: 1, open: 1 });
  assert.equal(s.connections, 1);
});

test('where there is no process (a browser), requests go through fetch and node:http is never loaded', async () => {
  /* The child hides process, then answers fetch itself with a Response-like
   * object: Node's own Response and fetch would load node:http. */
  const r = await runChild(`
    const real = process;
    const loaded = () => real.moduleLoadList.filter((m) => /^NativeModule (http|https|_http_agent)$/.test(m));
    const calls = [];
    globalThis.fetch = async (url, init) => {
      calls.push([url, init.method]);
      const body = new TextEncoder().encode(JSON.stringify({ id: 's1', app: 'a', user: 'u', version: 0 }));
      return { status: 200, headers: { get: (n) => (n === 'content-type' ? 'application/json' : null) }, arrayBuffer: async () => body.buffer };
    };
    Object.defineProperty(globalThis, 'process', { value: undefined, configurable: true, writable: true });
    const { MemdClient } = await import(${INDEX_URL});
    const memd = new MemdClient({ baseUrl: 'http://memd.example:8700' });
    const got = await memd.getSession({ app: 'a', user: 'u', sid: 's1' });
    Object.defineProperty(globalThis, 'process', { value: real, configurable: true, writable: true });
    console.log(JSON.stringify({ transport: memd.transport, id: got.id, calls, loaded: loaded() }));
  `);
  assert.equal(r.code, 0, r.err);
  assert.deepEqual(JSON.parse(r.out), {
    transport: 'fetch', id: 's1', calls: [['http://memd.example:8700/v1/apps/a/users/u/sessions/s1', 'GET']], loaded: [],
  });
});

test('https with a self-signed certificate: both transports, the certificate checked', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memd-tls-'));
  try {
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
    { stdio: 'ignore' });
    const s = await new StandIn([ok], { key: fs.readFileSync(key, 'utf8'), cert: fs.readFileSync(cert, 'utf8') }).start();
    const source = `
      const { MemdClient, MemdError } = await import(${INDEX_URL});
      const out = {};
      for (const transport of ['node', 'fetch']) {
        const memd = new MemdClient({ baseUrl: ${JSON.stringify(s.url)}, transport, retries: 0 });
        try {
          out[transport] = (await memd.getSession({ app: 'a', user: 'u', sid: 's1' })).id;
        } catch (e) {
          out[transport] = e instanceof MemdError ? e.code : String(e);
        }
      }
      console.log(JSON.stringify(out));
    `;
    /* Trusted through NODE_EXTRA_CA_CERTS: both get the answer over TLS. */
    const trusted = await runChild(source, { NODE_EXTRA_CA_CERTS: cert });
    assert.equal(trusted.code, 0, trusted.err);
    assert.deepEqual(JSON.parse(trusted.out), { node: 's1', fetch: 's1' });
    assert.ok(s.url.startsWith('https://'));
    /* Not trusted: the certificate is checked, both fail with network. */
    const untrusted = await runChild(source, { NODE_EXTRA_CA_CERTS: '' });
    assert.equal(untrusted.code, 0, untrusted.err);
    assert.deepEqual(JSON.parse(untrusted.out), { node: 'network', fetch: 'network' });
    assert.equal(s.seen.length, 2);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
