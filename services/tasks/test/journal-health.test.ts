// With the turn journal on, the tasks service's read-model projector is a
// health dependency of the host (what `trellis health` reports); off, it is
// absent.
import { startEmbedded } from "@trellis/platform";
import { describe, expect, it } from "vitest";
import { createTasksService } from "../src/definition.js";

const start = (journal: boolean) =>
  startEmbedded({
    services: [createTasksService()],
    port: 0,
    env: {
      ...process.env,
      TRELLIS_LOG_LEVEL: "error",
      TRELLIS_TASKS_JOURNAL: journal ? "true" : "false",
    },
  });

describe("tasks health with the turn journal", () => {
  it("reports the tasks-read-model projector when the journal is on", async () => {
    const trellis = await start(true);
    try {
      await trellis.server.health.probe();
      expect(trellis.server.health.dependencies()).toContainEqual({
        name: "projector tasks-read-model",
        healthy: true,
        error: undefined,
      });
      expect(trellis.server.health.status()).toBe("SERVING");
    } finally {
      await trellis.close({ graceMs: 100 });
    }
  });

  it("has no projector dependency when the journal is off", async () => {
    const trellis = await start(false);
    try {
      await trellis.server.health.probe();
      const names = trellis.server.health.dependencies().map((d) => d.name);
      expect(names).toContain("database");
      expect(names.some((n) => n.startsWith("projector"))).toBe(false);
    } finally {
      await trellis.close({ graceMs: 100 });
    }
  });
});
