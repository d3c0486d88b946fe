import { TrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { loadTasksConfig } from "../src/config.js";
import { DEFAULT_READ_MODEL_DELAY_MS } from "../src/store/read-model.js";

describe("TRELLIS_TASKS_PROJECTOR_DELAY", () => {
  it("defaults to the read model's batching delay", () => {
    expect(loadTasksConfig({}).TRELLIS_TASKS_PROJECTOR_DELAY).toBe(DEFAULT_READ_MODEL_DELAY_MS);
    expect(DEFAULT_READ_MODEL_DELAY_MS).toBe(30);
  });

  it("takes a duration up to a second, 0 to apply each wake-up at once", () => {
    const delay = (raw: string) => loadTasksConfig({ TRELLIS_TASKS_PROJECTOR_DELAY: raw });
    expect(delay("50ms").TRELLIS_TASKS_PROJECTOR_DELAY).toBe(50);
    expect(delay("0").TRELLIS_TASKS_PROJECTOR_DELAY).toBe(0);
    expect(delay("1s").TRELLIS_TASKS_PROJECTOR_DELAY).toBe(1000);
  });

  it.each(["soon", "-5ms", "2s", "1.5.5ms", "30 apples"])(
    "refuses %j with config_invalid",
    (raw) => {
      let thrown: unknown;
      try {
        loadTasksConfig({ TRELLIS_TASKS_PROJECTOR_DELAY: raw });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(TrellisError);
      expect((thrown as TrellisError).reason).toBe("config_invalid");
      expect((thrown as Error).message).toContain("TRELLIS_TASKS_PROJECTOR_DELAY");
    },
  );
});
