// SPDX-License-Identifier: MIT
// memd's MCP server against the official MCP TypeScript SDK's client:
// Streamable HTTP against a real `memd serve` (a key bound to a user, an
// unbound key, a read key), and stdio against `memd mcp`.
//
// usage: node sdk_test.js BASE_URL MEMD STDIO_DIR
// env: MCP_KEY_BOUND (write, app "app", user "alice"), MCP_KEY_UNBOUND
// (write), MCP_KEY_READ (read, app "app", user "alice").
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
	StreamableHTTPClientTransport,
	StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
	CallToolResult,
	ErrorCode,
	LATEST_PROTOCOL_VERSION,
	McpError,
} from '@modelcontextprotocol/sdk/types.js';

const [base, memd, stdioDir] = process.argv.slice(2);
if (!base || !memd || !stdioDir) throw new Error('usage: sdk_test.js BASE_URL MEMD STDIO_DIR');
const env = (name: string): string => {
	const v = process.env[name];
	if (!v) throw new Error(`${name} is not set`);
	return v;
};
const keyBound = env('MCP_KEY_BOUND');
const keyUnbound = env('MCP_KEY_UNBOUND');
const keyRead = env('MCP_KEY_READ');
const endpoint = new URL('/mcp', base);
const READ_TOOLS = ['get_context', 'list_sessions', 'search_memory'];
const ALL_TOOLS = ['add_memory', 'delete_memory', 'get_context', 'list_sessions', 'search_memory', 'update_memory'];

let checks = 0;
function ok(what: string): void {
	checks++;
	console.log(`ok ${checks} - ${what}`);
}

async function connect(key: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
	const client = new Client({ name: 'memd-sdk-test', version: '1.0.0' });
	const transport = new StreamableHTTPClientTransport(endpoint, {
		requestInit: { headers: { Authorization: `Bearer ${key}` } },
	});
	await client.connect(transport);
	return { client, transport };
}

// The REST API, to write what the tools then read.
async function rest(method: string, path: string, body?: unknown): Promise<unknown> {
	const r = await fetch(new URL(path, base), {
		method,
		headers: { Authorization: `Bearer ${keyUnbound}`, 'Content-Type': 'application/json' },
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	const text = await r.text();
	assert.ok(r.ok, `${method} ${path}: ${r.status} ${text}`);
	return text ? JSON.parse(text) : null;
}

async function seed(user: string, sid: string, text: string): Promise<void> {
	await rest('POST', `/v1/apps/app/users/${user}/sessions`, { id: sid });
	await rest('POST', `/v1/apps/app/users/${user}/sessions/${sid}/events`, {
		events: [{ role: 'user', content: text }],
	});
}

function text(res: CallToolResult): string {
	const c = res.content[0];
	assert.ok(c && c.type === 'text', 'the first content is text');
	return c.text;
}

function structured(res: CallToolResult): Record<string, unknown> {
	assert.notEqual(res.isError, true, `a tool error: ${JSON.stringify(res.content)}`);
	assert.ok(res.structuredContent, 'structured content');
	assert.deepEqual(JSON.parse(text(res)), res.structuredContent, 'the text is the structured content');
	return res.structuredContent as Record<string, unknown>;
}

function toolError(res: CallToolResult, needle: string): void {
	assert.equal(res.isError, true, `not a tool error: ${JSON.stringify(res)}`);
	assert.ok(text(res).includes(needle), `'${needle}' not in: ${text(res)}`);
}

async function rejectsWith(p: Promise<unknown>, check: (e: unknown) => boolean, what: string): Promise<void> {
	try {
		await p;
	} catch (e) {
		assert.ok(check(e), `${what}: ${String(e)}`);
		return;
	}
	assert.fail(`${what}: did not fail`);
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
	return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

// A raw POST to /mcp.
async function post(body: unknown, headers: Record<string, string>): Promise<Response> {
	return fetch(endpoint, {
		method: 'POST',
		headers: {
			'Content-Type': 'application/json',
			Accept: 'application/json, text/event-stream',
			...headers,
		},
		body: JSON.stringify(body),
	});
}

function initialize(version: string): unknown {
	return {
		jsonrpc: '2.0',
		id: 1,
		method: 'initialize',
		params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
	};
}

async function bound(): Promise<void> {
	await seed('alice', 's1', 'my cat is called Zebedee');
	await seed('bob', 's9', 'zebedee is the name of my dog');
	const { client, transport } = await connect(keyBound);
	assert.equal(client.getServerVersion()?.name, 'memd');
	assert.equal(transport.protocolVersion, LATEST_PROTOCOL_VERSION);
	assert.ok(transport.sessionId && /^[0-9a-f]{64}$/.test(transport.sessionId));
	ok('a bound key initializes a session at the SDK\'s latest revision');

	const { tools } = await client.listTools();
	assert.deepEqual(tools.map((t) => t.name).sort(), ALL_TOOLS);
	for (const t of tools) assert.ok(t.outputSchema, `${t.name} has an outputSchema`);
	const search = tools.find((t) => t.name === 'search_memory');
	assert.deepEqual(search?.inputSchema.required, ['query']);
	assert.equal(search?.inputSchema.properties?.['app'], undefined, 'bound: no app argument');
	assert.ok(search?.outputSchema, 'search_memory has an outputSchema');
	ok('tools/list: every tool, without app and user for a bound key');

	const found = structured(await call(client, 'search_memory', { query: 'zebedee', k: 5, mode: 'keyword' }));
	const results = found['results'] as Array<Record<string, unknown>>;
	assert.equal(results.length, 1, JSON.stringify(found));
	assert.equal(results[0]?.['session_id'], 's1');
	ok('search_memory finds the user\'s own event and not another user\'s');

	const ctx = structured(await call(client, 'get_context', { session_id: 's1' }));
	assert.equal((ctx['events'] as unknown[]).length, 1);
	ok('get_context');

	const list = structured(await call(client, 'list_sessions', { limit: 10 }));
	assert.deepEqual((list['sessions'] as Array<{ id: string }>).map((s) => s.id), ['s1']);
	assert.equal(list['next_cursor'], null);
	ok('list_sessions');

	const added = structured(
		await call(client, 'add_memory', {
			text: 'Alice prefers window seats on long flights',
			kind: 'preference',
			topics: ['travel'],
			entities: ['Alice'],
			session_id: 's1',
		}),
	);
	const id = added['id'] as string;
	assert.equal(added['version'], 1);
	const recalled = structured(await call(client, 'search_memory', { query: 'window seats', sources: ['memories'] }));
	const hits = recalled['results'] as Array<Record<string, unknown>>;
	assert.equal(hits.length, 1, JSON.stringify(recalled));
	assert.equal(hits[0]?.['memory_id'], id);
	assert.equal(hits[0]?.['source'], 'memory');
	ok('add_memory, and search_memory finds it');
	const updated = structured(await call(client, 'update_memory', { id, text: 'Alice prefers aisle seats', version: 1 }));
	assert.equal(updated['version'], 2);
	toolError(await call(client, 'update_memory', { id, text: 'stale', version: 1 }), 'conflict');
	ok('update_memory, and a stale version is a conflict');
	const deleted = structured(await call(client, 'delete_memory', { id }));
	assert.deepEqual(deleted, { id, deleted: true });
	toolError(await call(client, 'delete_memory', { id }), 'not_found');
	const gone = structured(await call(client, 'search_memory', { query: 'aisle seats', sources: ['memories'] }));
	assert.deepEqual(gone['results'], []);
	ok('delete_memory; deleting an unknown memory is a tool error');

	await rejectsWith(
		call(client, 'no_such_tool', {}),
		(e) => e instanceof McpError && e.code === ErrorCode.InvalidParams,
		'an unknown tool',
	);
	ok('an unknown tool is -32602');
	toolError(await call(client, 'search_memory', { k: 3 }), 'argument query is required');
	toolError(await call(client, 'search_memory', { query: 'x', mode: 'magic' }), 'argument mode');
	ok('bad arguments are tool errors');
	toolError(await call(client, 'get_context', { session_id: 'nope' }), 'not_found');
	ok('a memd error (an unknown session) is a tool error');
	toolError(await call(client, 'search_memory', { query: 'zebedee', user: 'bob' }), 'bound to one app and user');
	toolError(await call(client, 'list_sessions', { app: 'other' }), 'bound to one app and user');
	ok('a bound key naming another user or app is refused');

	// Raw requests in this session.
	const sid = transport.sessionId;
	const auth = { Authorization: `Bearer ${keyBound}` };
	let r = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { ...auth, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18' });
	assert.equal(r.status, 400, 'another revision than the session\'s');
	r = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { ...auth, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' });
	assert.equal(r.status, 400, 'an unknown revision');
	r = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { ...auth, 'Mcp-Session-Id': sid });
	assert.equal(r.status, 200);
	assert.deepEqual(await r.json(), { jsonrpc: '2.0', id: 5, result: {} });
	r = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { Authorization: `Bearer ${keyUnbound}`, 'Mcp-Session-Id': sid });
	assert.equal(r.status, 404, 'another key does not find the session');
	r = await post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }, { ...auth, 'Mcp-Session-Id': sid });
	assert.equal(r.status, 202);
	assert.equal(await r.text(), '');
	r = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, auth);
	assert.equal(r.status, 400, 'no session id');
	r = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { ...auth, 'Mcp-Session-Id': 'f'.repeat(64) });
	assert.equal(r.status, 404, 'an unknown session');
	r = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { 'Mcp-Session-Id': sid });
	assert.equal(r.status, 401, 'no key');
	r = await post(initialize(LATEST_PROTOCOL_VERSION), { ...auth, Origin: 'http://evil.example' });
	assert.equal(r.status, 403, 'a foreign Origin');
	r = await fetch(endpoint, { headers: { ...auth, 'Mcp-Session-Id': sid } });
	assert.equal(r.status, 405, 'GET');
	await r.text();
	ok('the transport: revision header, owner, 202, 400, 404, 401, 403, 405');

	// The session ends (another client of the same key ends it); this
	// client's next request is 404, and it must initialize again.
	r = await fetch(endpoint, { method: 'DELETE', headers: { ...auth, 'Mcp-Session-Id': sid } });
	assert.equal(r.status, 204);
	await rejectsWith(
		client.listTools(),
		(e) => e instanceof StreamableHTTPError && e.code === 404,
		'a request in an ended session',
	);
	await client.close();
	const again = await connect(keyBound);
	assert.notEqual(again.transport.sessionId, sid);
	assert.ok((await again.client.listTools()).tools.length >= READ_TOOLS.length);
	// The SDK's own end of a session.
	const ended = again.transport.sessionId;
	await again.transport.terminateSession();
	r = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { ...auth, 'Mcp-Session-Id': ended ?? '' });
	assert.equal(r.status, 404, 'terminateSession ended it');
	await again.client.close();
	ok('an ended session is 404, and a new one works');
}

async function unbound(): Promise<void> {
	const { client } = await connect(keyUnbound);
	const { tools } = await client.listTools();
	const search = tools.find((t) => t.name === 'search_memory');
	assert.deepEqual(search?.inputSchema.required, ['app', 'user', 'query']);
	toolError(await call(client, 'search_memory', { query: 'zebedee' }), 'argument app is required');
	const found = structured(await call(client, 'search_memory', { app: 'app', user: 'bob', query: 'zebedee' }));
	const results = found['results'] as Array<Record<string, unknown>>;
	assert.equal(results.length, 1);
	assert.equal(results[0]?.['session_id'], 's9');
	// An app that recalls memories into its context: get_context's query.
	await rest('POST', '/v1/apps/rec/users/carol/sessions', { id: 'c1' });
	await rest('POST', '/v1/apps/rec/users/carol/sessions/c1/events', {
		events: [{ role: 'user', content: 'what should I cook tonight?' }],
	});
	structured(await call(client, 'add_memory', { app: 'rec', user: 'carol', text: 'Carol is vegetarian' }));
	const ctx = structured(await call(client, 'get_context', { app: 'rec', user: 'carol', session_id: 'c1', query: 'vegetarian' }));
	const recalled = ctx['memories'] as { query: string; items: Array<{ text: string }> };
	assert.equal(recalled.query, 'vegetarian');
	assert.deepEqual(recalled.items.map((i) => i.text), ['Carol is vegetarian']);
	await client.close();
	ok('an unbound key names app and user in each call; get_context recalls for a query');
}

async function readOnly(): Promise<void> {
	const { client } = await connect(keyRead);
	const { tools } = await client.listTools();
	assert.deepEqual(tools.map((t) => t.name).sort(), READ_TOOLS);
	const list = structured(await call(client, 'list_sessions', {}));
	assert.equal((list['sessions'] as unknown[]).length, 1);
	await rejectsWith(
		call(client, 'add_memory', { text: 'x' }),
		(e) => e instanceof McpError && e.code === ErrorCode.InvalidParams,
		'a write tool with a read key',
	);
	await client.close();
	ok('a read key gets the read tools only');
}

async function batches(): Promise<void> {
	const auth = { Authorization: `Bearer ${keyUnbound}` };
	let r = await post(initialize('2025-03-26'), auth);
	assert.equal(r.status, 200);
	const sid = r.headers.get('mcp-session-id');
	assert.ok(sid);
	assert.equal(((await r.json()) as { result: { protocolVersion: string } }).result.protocolVersion, '2025-03-26');
	const h = { ...auth, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-03-26' };
	r = await post([{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 2, method: 'nope' }], h);
	assert.equal(r.status, 200);
	const answers = (await r.json()) as Array<{ id: number; error?: { code: number } }>;
	assert.equal(answers.length, 2);
	assert.equal(answers[1]?.error?.code, ErrorCode.MethodNotFound);
	r = await post('{not json', h);
	assert.equal(r.status, 400);
	assert.equal(((await r.json()) as { error: { code: number } }).error.code, ErrorCode.InvalidRequest);
	r = await fetch(endpoint, { method: 'POST', headers: { ...h, 'Content-Type': 'application/json' }, body: '{"jsonrpc":' });
	assert.equal(r.status, 400);
	assert.equal(((await r.json()) as { error: { code: number } }).error.code, ErrorCode.ParseError);
	r = await fetch(endpoint, { method: 'DELETE', headers: h });
	assert.equal(r.status, 204);
	r = await fetch(endpoint, { method: 'DELETE', headers: h });
	assert.equal(r.status, 404);
	ok('revision 2025-03-26 takes batches; parse errors are 400; DELETE ends a session');
}

async function stdio(): Promise<void> {
	const client = new Client({ name: 'memd-sdk-test', version: '1.0.0' });
	const childEnv: Record<string, string> = {};
	for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'MEMD_CONFIG') childEnv[k] = v;
	const transport = new StdioClientTransport({
		command: memd,
		args: ['mcp', '--app', 'app', '--user', 'alice'],
		cwd: stdioDir,
		env: childEnv,
		stderr: 'pipe',
	});
	let stderr = '';
	transport.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
	await client.connect(transport);
	assert.equal(client.getServerVersion()?.name, 'memd');
	const { tools } = await client.listTools();
	assert.deepEqual(tools.map((t) => t.name).sort(), ALL_TOOLS);
	assert.deepEqual(tools.find((t) => t.name === 'search_memory')?.inputSchema.required, ['query']);
	const list = structured(await call(client, 'list_sessions', {}));
	assert.deepEqual(list['sessions'], []);
	toolError(await call(client, 'get_context', { session_id: 'nope' }), 'not_found');
	const added = structured(await call(client, 'add_memory', { text: 'Call me Ali', kind: 'instruction' }));
	const found = structured(await call(client, 'search_memory', { query: 'call me', sources: ['memories'] }));
	assert.equal((found['results'] as Array<Record<string, unknown>>)[0]?.['memory_id'], added['id']);
	await rejectsWith(call(client, 'no_such_tool', {}), (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams, 'unknown tool over stdio');
	await client.close();
	assert.ok(existsSync(`${stdioDir}/data/memd.db`), `zero-config SQLite in the working directory (stderr: ${stderr})`);
	ok('stdio: memd mcp, zero-config, bound to --app and --user');
}

await bound();
await unbound();
await readOnly();
await batches();
await stdio();
console.log(`sdk_test: ${checks} checks passed`);
