import { describe, expect, it } from "vitest";
import { runRpcStackBench } from "../bench/rpc-stack.bench.js";

describe("npm run bench -- rpc-stack", () => {
  it("refuses rounds and windows that are not whole positive numbers before starting anything", async () => {
    for (const options of [
      { rounds: 0 },
      { rounds: Number.NaN },
      { rounds: 1.5 },
      { windowMs: 5 },
    ]) {
      await expect(runRpcStackBench(options)).rejects.toThrow(/must be a whole number/);
    }
  });
});
