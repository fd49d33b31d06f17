// SPDX-License-Identifier: MIT
// LangGraph checkpointing on memd (MemdSaver over HTTP) beside LangGraph's
// SqliteSaver (@langchain/langgraph-checkpoint-sqlite) on a file, in the
// same run: the same chain graph run N times on fresh threads (graph
// runs/s), then raw loops of put (a chain of checkpoints) and getTuple
// (latest) with their latencies, and where MemdSaver's time goes (the
// serializer, an HTTP round trip that does no work, the rest in memd).
// Not a pass/fail test (checkpoint_bench.sh runs it).
//
// usage: node checkpoint_bench.mjs MEMD_SAVER_JS GRAPHS_JS SQLITE_DIR RUNS STEPS OPS NAME=URL...
//   each NAME=URL is a memd serve to measure (e.g. full=http://127.0.0.1:8700)

import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';

const [saverJs, graphsJs, sqliteDir, runsArg, stepsArg, opsArg, ...servers] = process.argv.slice(2);
if (!saverJs || !graphsJs || !sqliteDir || !opsArg || servers.length === 0) {
  console.error('usage: checkpoint_bench.mjs MEMD_SAVER_JS GRAPHS_JS SQLITE_DIR RUNS STEPS OPS NAME=URL...');
  process.exit(2);
}
const RUNS = Number(runsArg);
const STEPS = Number(stepsArg);
const OPS = Number(opsArg);
/* Graph runs before the timed ones (JIT, connections, caches). */
const WARMUP_RUNS = 2;
/* The state a benchmark checkpoint carries besides LangGraph's own: a
 * chat's worth of text, so that serialization is not free. */
const PAYLOAD_TEXT = 'x'.repeat(2048);

const { MemdSaver } = await import(path.resolve(saverJs));
const { chainGraph } = await import(path.resolve(graphsJs));

const savers = [];
for (const spec of servers) {
  const eq = spec.indexOf('=');
  const name = spec.slice(0, eq);
  const url = spec.slice(eq + 1);
  savers.push({ name: `MemdSaver (memd ${name})`, make: () => new MemdSaver({ baseUrl: url, app: 'bench', user: `b-${uuid6(0)}` }), url });
}
/* SqliteSaver as LangGraph sets it up (journal_mode=WAL, synchronous as
 * better-sqlite3 leaves it), and the same with synchronous=FULL: the
 * durability memd's SQLite store has. */
let sqliteN = 0;
function sqliteSaver(full) {
  const file = path.join(sqliteDir, `saver-${++sqliteN}.db`);
  const db = new Database(file);
  const saver = new SqliteSaver(db);
  saver.setup();
  if (full) db.pragma('synchronous = FULL');
  return saver;
}
savers.push({ name: 'SqliteSaver (as set up)', make: () => sqliteSaver(false) });
savers.push({ name: 'SqliteSaver (synchronous=FULL)', make: () => sqliteSaver(true) });

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
function fmt(x, d = 1) {
  return x.toFixed(d);
}
/** ops/s, p50 and p99 (ms) of latencies (ms). */
function stats(lat) {
  const s = [...lat].sort((a, b) => a - b);
  const total = lat.reduce((a, b) => a + b, 0);
  return { rate: (lat.length * 1000) / total, p50: pct(s, 50), p99: pct(s, 99), mean: total / lat.length };
}

/** The saver's put, putWrites and getTuple calls, counted. */
function counted(saver) {
  const n = { put: 0, putWrites: 0, getTuple: 0 };
  for (const m of Object.keys(n)) {
    const f = saver[m].bind(saver);
    saver[m] = (...a) => { n[m]++; return f(...a); };
  }
  return n;
}

async function graphRuns(entry) {
  const saver = entry.make();
  const n = counted(saver);
  const g = chainGraph(saver, STEPS);
  for (let i = 0; i < WARMUP_RUNS; i++) await g.invoke({ log: [] }, { configurable: { thread_id: `warm-${uuid6(0)}` } });
  for (const k of Object.keys(n)) n[k] = 0;
  const t0 = performance.now();
  for (let i = 0; i < RUNS; i++) {
    const out = await g.invoke({ log: [] }, { configurable: { thread_id: `run-${uuid6(0)}` } });
    if (out.n !== STEPS) throw new Error(`${entry.name}: a run ended with n=${out.n}, not ${STEPS}`);
  }
  const ms = performance.now() - t0;
  const ops = n.put + n.putWrites + n.getTuple;
  return { runsPerS: (RUNS * 1000) / ms, msPerRun: ms / RUNS, perRun: { put: n.put / RUNS, putWrites: n.putWrites / RUNS, getTuple: n.getTuple / RUNS }, opsPerS: (ops * 1000) / ms };
}

/** A checkpoint like the graph's, with PAYLOAD_TEXT in a channel. */
function benchCheckpoint(i) {
  const cp = emptyCheckpoint();
  cp.id = uuid6(0);
  cp.channel_values = { log: [`s${i}`], n: i, text: PAYLOAD_TEXT };
  cp.channel_versions = { log: i + 1, n: i + 1, text: 1 };
  cp.versions_seen = { [`s${i}`]: { log: i, n: i } };
  return cp;
}

async function rawLoops(entry) {
  const saver = entry.make();
  const thread = `raw-${uuid6(0)}`;
  let config = { configurable: { thread_id: thread, checkpoint_ns: '' } };
  const put = [];
  for (let i = 0; i < OPS; i++) {
    const cp = benchCheckpoint(i);
    const t0 = performance.now();
    config = await saver.put(config, cp, { source: 'loop', step: i, parents: {} }, i === 0 ? cp.channel_versions : { log: i + 1, n: i + 1 });
    put.push(performance.now() - t0);
  }
  const get = [];
  const latest = { configurable: { thread_id: thread, checkpoint_ns: '' } };
  for (let i = 0; i < OPS; i++) {
    const t0 = performance.now();
    const t = await saver.getTuple(latest);
    get.push(performance.now() - t0);
    if (t?.checkpoint.channel_values.text !== PAYLOAD_TEXT) throw new Error(`${entry.name}: getTuple lost the text channel`);
  }
  return { put: stats(put), get: stats(get) };
}

/* Where a MemdSaver put's time goes: the serializer alone (the same
 * checkpoint, dumpsTyped + base64), an HTTP round trip memd does no work
 * for (GET /healthz), the rest is memd's (parse, store, commit). */
async function profile(entry) {
  const saver = entry.make();
  const ser = [];
  for (let i = 0; i < OPS; i++) {
    const cp = benchCheckpoint(i);
    const t0 = performance.now();
    const [, bytes] = await saver.serde.dumpsTyped({ v: 1, checkpoint: cp, carried: {} });
    Buffer.from(bytes).toString('base64');
    ser.push(performance.now() - t0);
  }
  const rt = [];
  for (let i = 0; i < OPS; i++) {
    const t0 = performance.now();
    await saver.client.healthz();
    rt.push(performance.now() - t0);
  }
  return { serde: stats(ser), http: stats(rt) };
}

function sqlitePragmas() {
  const db = new Database(path.join(sqliteDir, 'pragmas.db'));
  const saver = new SqliteSaver(db);
  saver.setup();
  const out = { journal_mode: db.pragma('journal_mode', { simple: true }), synchronous: db.pragma('synchronous', { simple: true }) };
  db.close();
  return out;
}

fs.mkdirSync(sqliteDir, { recursive: true });
const pragmas = sqlitePragmas();
const SYNC_NAMES = ['OFF', 'NORMAL', 'FULL', 'EXTRA'];
console.log(`checkpoint_bench: a chain graph of ${STEPS} steps run ${RUNS} times (after ${WARMUP_RUNS}), each on a new thread;`);
console.log(`raw loops of ${OPS} puts (one thread, ~${PAYLOAD_TEXT.length} B of state) and ${OPS} getTuple (latest), one at a time.`);
console.log('Durability:');
console.log('  memd: SQLite store, WAL, synchronous as its config says (FULL by default: an acknowledged put');
console.log('        waited for fsync, and survives power loss; memd NORMAL: survives a crash of memd, not of the machine)');
console.log(`  SqliteSaver as set up: journal_mode=${pragmas.journal_mode}, synchronous=${SYNC_NAMES[pragmas.synchronous] ?? pragmas.synchronous}` +
  (pragmas.synchronous < 2 ? ' (WAL + NORMAL: no fsync per commit; survives a crash of the process, may lose the last commits on power loss)' : ''));
console.log('  SqliteSaver synchronous=FULL: fsync per commit, as memd FULL');
console.log('');

const rows = [];
for (const entry of savers) {
  const g = await graphRuns(entry);
  const r = await rawLoops(entry);
  rows.push({ entry, g, r });
  console.log(`${entry.name}`);
  console.log(`  graph: ${fmt(g.runsPerS, 2)} runs/s (${fmt(g.msPerRun)} ms a run; per run ${g.perRun.put} put, ${g.perRun.putWrites} putWrites, ${g.perRun.getTuple} getTuple: ${fmt(g.opsPerS, 0)} saver ops/s)`);
  console.log(`  put:      ${fmt(r.put.rate, 0)} ops/s, p50 ${fmt(r.put.p50, 2)} ms, p99 ${fmt(r.put.p99, 2)} ms`);
  console.log(`  getTuple: ${fmt(r.get.rate, 0)} ops/s, p50 ${fmt(r.get.p50, 2)} ms, p99 ${fmt(r.get.p99, 2)} ms`);
  if (entry.url) {
    const p = await profile(entry);
    console.log(`  where a put goes: serializer ${fmt(p.serde.mean, 3)} ms, an HTTP round trip (GET /healthz) ${fmt(p.http.mean, 3)} ms, ` +
      `memd's work (the rest of the mean) ${fmt(Math.max(0, r.put.mean - p.serde.mean - p.http.mean), 3)} ms`);
  }
}
const base = rows.find((x) => x.entry.name === 'SqliteSaver (as set up)');
console.log('');
console.log('Ratios (MemdSaver / SqliteSaver as set up; above 1 = memd faster):');
for (const x of rows) {
  if (x === base) continue;
  console.log(`  ${x.entry.name}: graph runs ${fmt(x.g.runsPerS / base.g.runsPerS, 3)}, put ${fmt(x.r.put.rate / base.r.put.rate, 3)}, getTuple ${fmt(x.r.get.rate / base.r.get.rate, 3)}`);
}
