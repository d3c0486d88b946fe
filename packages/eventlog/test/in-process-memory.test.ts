// Memory of the in-process log, measured in a child process with --expose-gc.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

async function heapGrowth(script: string, ...args: string[]): Promise<number> {
  const { stdout } = await run(
    process.execPath,
    ["--expose-gc", "--import", "tsx", fixture(script), ...args],
    { timeout: 60_000 },
  );
  return Number(stdout.trim());
}

describe("in-process log memory", () => {
  // A durable consumer waiting on the in-process log must not hold memory per
  // event it was woken for (it once kept a reaction on a long-lived promise per
  // wake-up: ~200 bytes per append, per waiting consumer, forever).
  it("keeps no memory per wake-up of a waiting durable consumer", async () => {
    const without = await heapGrowth("waiting-consumer-heap.ts", "30000", "no");
    const withConsumer = await heapGrowth("waiting-consumer-heap.ts", "30000", "yes");
    // The journal itself keeps every event; the consumer may add a little
    // bookkeeping, not ~200 bytes per append (6 MB here).
    expect(withConsumer - without).toBeLessThan(1_500_000);
  }, 120_000);

  // Embedded mode: the log over the outbox keeps a window of events, so a
  // long-running process does not grow with its history.
  it("stays bounded over many appends when windowed over an archive", async () => {
    const everything = await heapGrowth("windowed-log-heap.ts", "45000", "all");
    const windowed = await heapGrowth("windowed-log-heap.ts", "45000", "1000");
    // 40,000 events kept in full take tens of MB; a window of 1,000 keeps
    // its size whatever went through (its own events were there before).
    expect(everything).toBeGreaterThan(10_000_000);
    expect(windowed).toBeLessThan(1_500_000);
  }, 120_000);
});
