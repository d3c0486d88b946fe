/**
 * Where an embedded turn's PGlite time goes, statement by statement: the
 * time the engine runs synchronously for each statement (PGlite executes a
 * protocol message in one synchronous call into WASM, so its wall time on
 * the main thread is its CPU, queueing left out), summed per statement
 * text and divided by the turns measured.
 *
 * Embedded Trellis runs in this process (`startEmbedded`, PGlite in a
 * temporary directory, rate limits out of reach; as `turn-footprint.ts`),
 * loaded with `ChatService.Send` turns of the zero-latency agent at
 * `TRELLIS_PGLITE_CONCURRENCY` in flight (default 32) for
 * `TRELLIS_PGLITE_MS` (default 8,000) after a 3 s warm-up. A statement
 * run as `execute trellis_stmt_N(…)` (storage's prepared statements, see
 * `pglite-prepared.ts`) is shown with the text it was prepared from;
 * statements are grouped by their first 140 characters with literals left
 * out (so batches of different sizes of one statement are one row).
 * Reads PGlite's `execProtocolRawSync` (0.5's internal entry point): the
 * bench refuses to run when a PGlite version no longer has it.
 *
 *   npx tsx bench/pglite-statements.ts       # TRELLIS_PGLITE_TOP=12 for more rows
 */
import { PGlite } from "@electric-sql/pglite";
import { startBenchEmbedded } from "./lib/embedded.js";
import { runLoad } from "./lib/load.js";
import { wholeFromEnv } from "./lib/settings.js";
import { bearerTransport } from "./lib/transport.js";
import { chatTurnOps } from "./turn.bench.js";

const API_KEY = "trellis-pglite-key-0123456789abcdef";
const concurrency = wholeFromEnv(process.env, "TRELLIS_PGLITE_CONCURRENCY", 32);
const windowMs = wholeFromEnv(process.env, "TRELLIS_PGLITE_MS", 8000);
const top = wholeFromEnv(process.env, "TRELLIS_PGLITE_TOP", 8);

/** One statement text's runs in the window. */
interface Clocked {
  runs: number;
  ms: number;
}

type RawSync = (message: Uint8Array, ...rest: unknown[]) => unknown;
const engine = PGlite.prototype as unknown as { execProtocolRawSync?: RawSync };
const original = engine.execProtocolRawSync;
if (typeof original !== "function") {
  throw new Error("this PGlite has no execProtocolRawSync: the bench needs updating");
}

const QUERY = 0x51; // 'Q', the simple protocol's query message
const decoder = new TextDecoder();
/** Prepared statement names to the text they were prepared from. */
const prepared = new Map<string, string>();
const clocked = new Map<string, Clocked>();
let clocking = false;

/** A statement's key: its text with literal values and argument lists left out. */
function keyOf(message: Uint8Array): string {
  if (message[0] !== QUERY) return `(protocol message '${String.fromCharCode(message[0] ?? 0)}')`;
  // Type byte, 4-byte length, text, NUL.
  const text = decoder.decode(message.subarray(5, Math.min(message.length - 1, 5 + 4000)));
  const prepare = /^prepare (trellis_stmt_\d+) as ([\s\S]*)/.exec(text);
  if (prepare) prepared.set(prepare[1] as string, prepare[2] as string);
  const execute = /^execute (trellis_stmt_\d+)/.exec(text);
  const statement = execute ? (prepared.get(execute[1] as string) ?? execute[1]) : text;
  return (statement as string)
    .replace(/'(?:[^']|'')*'/g, "…")
    .replace(/\s+/g, " ")
    .slice(0, 140);
}

engine.execProtocolRawSync = function (this: unknown, message, ...rest) {
  const key = keyOf(message);
  if (!clocking) return original.call(this, message, ...rest);
  const start = process.hrtime.bigint();
  try {
    return original.call(this, message, ...rest);
  } finally {
    const entry = clocked.get(key) ?? { runs: 0, ms: 0 };
    entry.runs += 1;
    entry.ms += Number(process.hrtime.bigint() - start) / 1e6;
    clocked.set(key, entry);
  }
};

const { trellis, stop } = await startBenchEmbedded(API_KEY, "trellis-pglite-statements-");
try {
  const op = await chatTurnOps(bearerTransport(trellis.address.url, API_KEY));
  await runLoad(op, { concurrency, durationMs: 3000 });
  clocking = true;
  const result = await runLoad(op, { concurrency, durationMs: windowMs });
  clocking = false;
  if (result.errors > 0) console.log("first error:", result.firstError);
  const turns = result.calls;
  const rows = [...clocked].sort((a, b) => b[1].ms - a[1].ms);
  const total = rows.reduce((sum, [, entry]) => sum + entry.ms, 0);
  const runs = rows.reduce((sum, [, entry]) => sum + entry.runs, 0);
  console.log(
    `${turns} turns at ${concurrency} in flight (${result.perSecond.toFixed(0)}/s): PGlite ran ${(total / turns).toFixed(3)} ms and ${(runs / turns).toFixed(2)} statements per turn\n`,
  );
  console.log("ms/turn  runs/turn  ms/run  statement");
  for (const [key, entry] of rows.slice(0, top)) {
    console.log(
      `${(entry.ms / turns).toFixed(3).padStart(7)}  ${(entry.runs / turns).toFixed(3).padStart(9)}  ${(entry.ms / entry.runs).toFixed(2).padStart(6)}  ${key}`,
    );
  }
} finally {
  engine.execProtocolRawSync = original;
  await stop();
}
