/**
 * Embedded Trellis (`trellis dev`) for the UI fan-out benchmark, run with
 * `--expose-gc` under `fork`: on an IPC `"memory"` message it collects
 * garbage twice and answers with `process.memoryUsage()`, so the benchmark
 * can measure the gateway's heap per subscriber without GC timing noise.
 */
import { runDev } from "../../src/cli/dev.js";

process.on("message", (message) => {
  if (message !== "memory") return;
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  process.send?.({ gc: gc !== undefined, ...process.memoryUsage() });
});

process.exitCode = await runDev(process.env);
process.disconnect?.();
