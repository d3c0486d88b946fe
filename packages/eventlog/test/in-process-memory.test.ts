// A durable consumer waiting on the in-process log must not hold memory per
// event it was woken for (it once kept a reaction on a long-lived promise per
// wake-up: ~200 bytes per append, per waiting consumer, forever).
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const script = fileURLToPath(new URL("./fixtures/waiting-consumer-heap.ts", import.meta.url));

async function growth(waiting: boolean): Promise<number> {
  const { stdout } = await run(
    process.execPath,
    ["--expose-gc", "--import", "tsx", script, "30000", waiting ? "yes" : "no"],
    { timeout: 60_000 },
  );
  return Number(stdout.trim());
}

describe("in-process log memory", () => {
  it("keeps no memory per wake-up of a waiting durable consumer", async () => {
    const [without, withConsumer] = [await growth(false), await growth(true)];
    // The journal itself keeps every event; the consumer may add a little
    // bookkeeping, not ~200 bytes per append (6 MB here).
    expect(withConsumer - without).toBeLessThan(1_500_000);
  }, 120_000);
});
