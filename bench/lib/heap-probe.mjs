// Preloaded into every process of a mesh by the heap benchmark
// (`--expose-gc --import bench/lib/heap-probe.mjs`, bench/heap.bench.ts):
// on SIGUSR2 the process collects garbage twice and writes its
// `process.memoryUsage()` to `$TRELLIS_HEAP_PROBE_DIR/<pid>.json`. Plain
// JavaScript: it is loaded before tsx.
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.env.TRELLIS_HEAP_PROBE_DIR;
if (dir && typeof globalThis.gc === "function") {
  process.on("SIGUSR2", () => {
    globalThis.gc();
    globalThis.gc();
    const file = join(dir, `${process.pid}.json`);
    // Written whole, then renamed: the reader never sees half a file.
    writeFileSync(`${file}.tmp`, JSON.stringify(process.memoryUsage()));
    renameSync(`${file}.tmp`, file);
  });
}
