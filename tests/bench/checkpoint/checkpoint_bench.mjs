// SPDX-License-Identifier: MIT
// LangGraph checkpointing on memd (MemdSaver over HTTP) beside LangGraph's
// SqliteSaver (@langchain/langgraph-checkpoint-sqlite) on a file, in the
// same run: the same chain graph run N times on fresh threads, C runs at
// a time on distinct threads for each C asked for (graph runs/s, steps/s,
// this process's CPU per run, the ratios; every thread's final state then
// read back through a new saver and checked against an uninterrupted
// run's), then raw loops of put (a chain of checkpoints) and getTuple
// (latest) with their latencies, and where MemdSaver's time goes (the
// serializer, an HTTP round trip that does no work, the rest in memd).
// Not a pass/fail test (checkpoint_bench.sh runs it).
//
// usage: node checkpoint_bench.mjs MEMD_SAVER_JS GRAPHS_JS SQLITE_DIR RUNS STEPS OPS CONC NAME=URL...
//   CONC: the concurrencies, comma-separated (e.g. 1,4,16,64); each
//   NAME=URL is a memd serve to measure (e.g. full=http://127.0.0.1:8700)

import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { MemorySaver, emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { isDeepStrictEqual } from 'node:util';

const [saverJs, graphsJs, sqliteDir, runsArg, stepsArg, opsArg, concArg, ...servers] = process.argv.slice(2);
const CONC = (concArg ?? '').split(',').map(Number);
if (!saverJs || !graphsJs || !sqliteDir || !opsArg || servers.length === 0 ||
    !CONC.every((c) => Number.isInteger(c) && c > 0)) {
  console.error('usage: checkpoint_bench.mjs MEMD_SAVER_JS GRAPHS_JS SQLITE_DIR RUNS STEPS OPS CONC NAME=URL...');
  process.exit(2);
}
const RUNS = Number(runsArg);
const STEPS = Number(stepsArg);
const OPS = Number(opsArg);
/* Each of C concurrent runners does at least this many runs, so that the
 * timed runs are not one start-up wave at large C. */
const RUNS_PER_RUNNER_MIN = 2;
/* Warm-up before the timed runs (JIT, connections, caches): batches of
 * WARMUP_BATCH runs until a batch's CPU per run is within
 * WARMUP_STEADY of the one before, at most WARMUP_MAX_RUNS runs. Two runs
 * were not enough: V8 was still compiling the HTTP client's path, and the
 * first concurrency measured took about twice the CPU per run of the
 * next ones. */
const WARMUP_BATCH = 4;
const WARMUP_STEADY = 0.15;
const WARMUP_MAX_RUNS = 64;
/* Before anything is timed, every saver runs this many graph runs, the
 * savers taking turns a run at a time. The steady test above alone let
 * the first saver measured be timed while V8 was still optimizing
 * LangGraph's code on its background threads: memd FULL at C=1, measured
 * first, took 47-55 ms of node CPU a run, and 32-35 ms after 40 runs or
 * more. */
const WARMUP_COMMON_RUNS = 48;
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
  /* reopen: a new saver on the same user, to read back what one put. */
  savers.push({
    name: `MemdSaver (memd ${name})`, url,
    make: () => {
      const user = `b-${uuid6(0)}`;
      const saver = new MemdSaver({ baseUrl: url, app: 'bench', user });
      saver.reopen = () => new MemdSaver({ baseUrl: url, app: 'bench', user });
      return saver;
    },
  });
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
  saver.reopen = () => new SqliteSaver(new Database(file));
  return saver;
}
savers.push({ name: 'SqliteSaver (as set up)', make: () => sqliteSaver(false), base: true });
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

/** The saver's put, putWrites and getTuple calls, counted, and the time
 * from each put's call to its answer, summed (putMs). */
function counted(saver) {
  const n = { put: 0, putWrites: 0, getTuple: 0, putMs: 0 };
  for (const m of ['put', 'putWrites', 'getTuple']) {
    const f = saver[m].bind(saver);
    saver[m] = (...a) => { n[m]++; return f(...a); };
  }
  const put = saver.put;
  saver.put = async (...a) => {
    const t0 = performance.now();
    try {
      return await put(...a);
    } finally {
      n.putMs += performance.now() - t0;
    }
  };
  return n;
}

/* The state and next nodes of an uninterrupted run of the graph (on
 * LangGraph's MemorySaver): what every benchmark thread must end with. */
async function expectedFinal() {
  const g = chainGraph(new MemorySaver(), STEPS);
  const config = { configurable: { thread_id: 'expected' } };
  await g.invoke({ log: [] }, config);
  const s = await g.getState(config);
  return { values: s.values, next: s.next };
}

/** Runs g in batches until its CPU per run is steady (see WARMUP_BATCH). */
async function warmUp(g) {
  let before = Infinity;
  for (let done = 0; done < WARMUP_MAX_RUNS; done += WARMUP_BATCH) {
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < WARMUP_BATCH; i++) await g.invoke({ log: [] }, { configurable: { thread_id: `warm-${uuid6(0)}` } });
    const cpu = process.cpuUsage(cpu0);
    const perRun = (cpu.user + cpu.system) / WARMUP_BATCH;
    if (Math.abs(perRun - before) <= WARMUP_STEADY * before) return;
    before = perRun;
  }
}

/** C graph runs at a time, each on its own new thread, max(RUNS,
 * RUNS_PER_RUNNER_MIN * C) in all: runs/s, steps/s, the saver's calls per
 * run; then every thread's final state read back through a new saver
 * (not this one's caches) and checked against an uninterrupted run's. */
async function graphRuns(entry, C, expected) {
  const saver = entry.make();
  const n = counted(saver);
  const g = chainGraph(saver, STEPS);
  await warmUp(g);
  for (const k of Object.keys(n)) n[k] = 0;
  const total = Math.max(RUNS, RUNS_PER_RUNNER_MIN * C);
  const threads = [];
  let next = 0;
  const runner = async () => {
    while (next < total) {
      next++;
      const thread = `run-c${C}-${uuid6(0)}`;
      threads.push(thread);
      const out = await g.invoke({ log: [] }, { configurable: { thread_id: thread } });
      if (out.n !== STEPS) throw new Error(`${entry.name}: a run ended with n=${out.n}, not ${STEPS}`);
    }
  };
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  await Promise.all(Array.from({ length: C }, runner));
  const cpu = process.cpuUsage(cpu0);
  const ms = performance.now() - t0;
  const check = chainGraph(saver.reopen(), STEPS);
  for (const thread of threads) {
    const s = await check.getState({ configurable: { thread_id: thread } });
    if (!isDeepStrictEqual(s.values, expected.values) || !isDeepStrictEqual(s.next, expected.next)) {
      throw new Error(`${entry.name}: thread ${thread} (C=${C}) ended with ${JSON.stringify({ values: s.values, next: s.next })}, ` +
        `not an uninterrupted run's ${JSON.stringify(expected)}`);
    }
  }
  const ops = n.put + n.putWrites + n.getTuple;
  return {
    runs: total, checked: threads.length, runsPerS: (total * 1000) / ms, stepsPerS: (total * STEPS * 1000) / ms, msPerRun: ms / total,
    cpuMsPerRun: (cpu.user + cpu.system) / 1000 / total,
    /* A run's puts wait one for the other (LangGraph sends a checkpoint's
     * put once the one before it is answered): the share of a run's time
     * its puts were on their way (a run takes C * ms / total here). */
    putShare: n.putMs / (ms * C),
    perRun: { put: n.put / total, putWrites: n.putWrites / total, getTuple: n.getTuple / total }, opsPerS: (ops * 1000) / ms,
  };
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
console.log(`checkpoint_bench: a chain graph of ${STEPS} steps run ${RUNS} times (after ${WARMUP_COMMON_RUNS} runs on every saver, then more until the CPU per run is steady), each on a new thread;`);
console.log(`raw loops of ${OPS} puts (one thread, ~${PAYLOAD_TEXT.length} B of state) and ${OPS} getTuple (latest), one at a time.`);
console.log('Durability:');
console.log('  memd: SQLite store, WAL, synchronous as its config says (FULL by default: an acknowledged put');
console.log('        waited for fsync, and survives power loss; memd NORMAL: survives a crash of memd, not of the machine)');
console.log(`  SqliteSaver as set up: journal_mode=${pragmas.journal_mode}, synchronous=${SYNC_NAMES[pragmas.synchronous] ?? pragmas.synchronous}` +
  (pragmas.synchronous < 2 ? ' (WAL + NORMAL: no fsync per commit; survives a crash of the process, may lose the last commits on power loss)' : ''));
console.log('  SqliteSaver synchronous=FULL: fsync per commit, as memd FULL');
console.log('');

/* The graph runs first, every saver at each C in turn (so that a change
 * of load on the machine touches all of a C's figures alike), then each
 * saver's raw loops. */
const expected = await expectedFinal();
{
  const warm = savers.map((e) => chainGraph(e.make(), STEPS));
  for (let i = 0; i < WARMUP_COMMON_RUNS; i++) {
    for (const g of warm) await g.invoke({ log: [] }, { configurable: { thread_id: `warm-${uuid6(0)}` } });
  }
}
const graph = new Map(savers.map((e) => [e, new Map()]));
for (const C of CONC) {
  for (const entry of savers) graph.get(entry).set(C, await graphRuns(entry, C, expected));
}
console.log(`Graph runs, C at a time on distinct threads (runs/s; steps/s = runs/s x ${STEPS}; this process's CPU per run: the graph's and the saver's`);
console.log('work, which for MemdSaver includes its HTTP client; puts on their way: the share of a run\'s time from a put\'s call to its');
console.log('answer, summed over the run\'s puts, which LangGraph sends one after the other); every thread\'s final state checked:');
console.log(['C', ...savers.map((e) => e.name)].join(' | '));
for (const C of CONC) {
  console.log([String(C), ...savers.map((e) => {
    const g = graph.get(e).get(C);
    return `${fmt(g.runsPerS, 2)} runs/s, ${fmt(g.stepsPerS, 0)} steps/s, node CPU ${fmt(g.cpuMsPerRun)} ms a run, ` +
      `puts on their way ${fmt(100 * g.putShare, 0)}% of it (${g.runs} runs, ${g.checked} checked)`;
  })].join(' | '));
}
const base = savers.find((e) => e.base);
const fullSqlite = savers.find((e) => e.name === 'SqliteSaver (synchronous=FULL)');
console.log('Ratios of graph runs/s (above 1 = memd faster):');
for (const C of CONC) {
  const parts = [];
  for (const e of savers.filter((x) => x.url)) {
    const r = graph.get(e).get(C).runsPerS;
    parts.push(`${e.name} / SqliteSaver as set up ${fmt(r / graph.get(base).get(C).runsPerS, 3)}, / SqliteSaver FULL ${fmt(r / graph.get(fullSqlite).get(C).runsPerS, 3)}`);
  }
  console.log(`  C=${C}: ${parts.join('; ')}`);
}
console.log('');

const rows = [];
for (const entry of savers) {
  const g = graph.get(entry).get(CONC[0]);
  const r = await rawLoops(entry);
  rows.push({ entry, g, r });
  console.log(`${entry.name}`);
  console.log(`  graph (C=${CONC[0]}): ${fmt(g.runsPerS, 2)} runs/s (${fmt(g.msPerRun)} ms a run; per run ${g.perRun.put} put, ${g.perRun.putWrites} putWrites, ${g.perRun.getTuple} getTuple: ${fmt(g.opsPerS, 0)} saver ops/s)`);
  console.log(`  put:      ${fmt(r.put.rate, 0)} ops/s, p50 ${fmt(r.put.p50, 2)} ms, p99 ${fmt(r.put.p99, 2)} ms`);
  console.log(`  getTuple: ${fmt(r.get.rate, 0)} ops/s, p50 ${fmt(r.get.p50, 2)} ms, p99 ${fmt(r.get.p99, 2)} ms`);
  if (entry.url) {
    const p = await profile(entry);
    console.log(`  where a put goes: serializer ${fmt(p.serde.mean, 3)} ms, an HTTP round trip (GET /healthz) ${fmt(p.http.mean, 3)} ms, ` +
      `memd's work (the rest of the mean) ${fmt(Math.max(0, r.put.mean - p.serde.mean - p.http.mean), 3)} ms`);
  }
}
const baseRow = rows.find((x) => x.entry === base);
console.log('');
console.log(`Ratios (MemdSaver / SqliteSaver as set up; above 1 = memd faster; graph runs at C=${CONC[0]}):`);
for (const x of rows) {
  if (x === baseRow) continue;
  console.log(`  ${x.entry.name}: graph runs ${fmt(x.g.runsPerS / baseRow.g.runsPerS, 3)}, put ${fmt(x.r.put.rate / baseRow.r.put.rate, 3)}, getTuple ${fmt(x.r.get.rate / baseRow.r.get.rate, 3)}`);
}
