/**
 * What grew between two V8 heap snapshots: live objects counted and sized
 * by constructor (or, for strings, closures and arrays, by kind), the
 * largest growth first.
 *
 *   npx tsx bench/heap-diff.ts before.heapsnapshot after.heapsnapshot   # TRELLIS_HEAP_DIFF_TOP=30
 */
import { readFile } from "node:fs/promises";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Stops with one line saying why (exit 2): no stack for a bad argument. */
function refuse(message: string): never {
  console.error(`heap-diff: ${message}`);
  process.exit(2);
}

/** The snapshot in `file`, or a refusal naming the file and what is wrong. */
async function load(file: string): Promise<Snapshot> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    refuse(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  let snap: Partial<Snapshot>;
  try {
    snap = JSON.parse(text) as Partial<Snapshot>;
  } catch {
    refuse(`${file} is not JSON (a V8 heap snapshot is)`);
  }
  const meta = snap?.snapshot?.meta;
  if (
    !Array.isArray(meta?.node_fields) ||
    !Array.isArray(meta?.node_types?.[0]) ||
    !Array.isArray(snap.nodes) ||
    !Array.isArray(snap.strings)
  ) {
    refuse(`${file} is not a V8 heap snapshot (no snapshot.meta, nodes and strings)`);
  }
  return snap as Snapshot;
}

/** Count and self size of live objects per constructor / kind. */
async function census(file: string): Promise<Map<string, { count: number; bytes: number }>> {
  const snap = await load(file);
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const out = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt] as number] as string;
    const name = snap.strings[snap.nodes[i + nameAt] as number] as string;
    const key = type === "object" || type === "native" ? `${type}:${name}` : type;
    const entry = out.get(key) ?? { count: 0, bytes: 0 };
    entry.count += 1;
    entry.bytes += snap.nodes[i + sizeAt] as number;
    out.set(key, entry);
  }
  return out;
}

const [beforeFile, afterFile] = process.argv.slice(2);
if (!beforeFile || !afterFile) {
  refuse("usage: npx tsx bench/heap-diff.ts before.heapsnapshot after.heapsnapshot");
}
const top = Number(process.env.TRELLIS_HEAP_DIFF_TOP ?? 30);
const before = await census(beforeFile);
const after = await census(afterFile);
const rows = [...after].map(([key, a]) => {
  const b = before.get(key) ?? { count: 0, bytes: 0 };
  return { key, count: a.count - b.count, bytes: a.bytes - b.bytes, total: a.count };
});
rows.sort((x, y) => y.bytes - x.bytes);
console.log("   +bytes   +count    count  constructor / kind");
for (const r of rows.slice(0, top)) {
  console.log(
    `${String(r.bytes).padStart(9)} ${String(r.count).padStart(8)} ${String(r.total).padStart(8)}  ${r.key}`,
  );
}
