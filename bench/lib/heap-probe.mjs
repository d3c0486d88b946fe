// Preloaded into every process of a mesh by the heap benchmark
// (`--expose-gc --import bench/lib/heap-probe.mjs`, bench/heap.bench.ts):
// on SIGUSR2 the process collects garbage twice and writes its
// `process.memoryUsage()` to `$TRELLIS_HEAP_PROBE_DIR/<pid>.json`. Plain
// JavaScript: it is loaded before tsx.
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeHeapSnapshot } from "node:v8";

const dir = process.env.TRELLIS_HEAP_PROBE_DIR;
// TRELLIS_HEAP_SNAPSHOTS=1: each reading also writes a heap snapshot
// (`<pid>-<reading>.heapsnapshot` in the same directory), to find what grows.
const snapshots = process.env.TRELLIS_HEAP_SNAPSHOTS === "1";
let readings = 0;
if (dir && typeof globalThis.gc === "function") {
  process.on("SIGUSR2", () => {
    globalThis.gc();
    globalThis.gc();
    readings += 1;
    if (snapshots) writeHeapSnapshot(join(dir, `${process.pid}-${readings}.heapsnapshot`));
    const file = join(dir, `${process.pid}.json`);
    // Written whole, then renamed: the reader never sees half a file.
    writeFileSync(`${file}.tmp`, JSON.stringify(process.memoryUsage()));
    renameSync(`${file}.tmp`, file);
  });
}
