/**
 * Storage contract, part 4: crash safety — a child process holding the
 * outbox or the relay is killed; nothing committed is lost. Runs only on a
 * target with a childConfig (a server).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { eventually, uniqueName } from "@trellis/testkit";
import { describe, expect, it } from "vitest";
import { appendToOutbox } from "../outbox/outbox.js";
import type { OutboxRelay } from "../outbox/outbox-relay.js";
import type { ChildLine, CrashChildConfig } from "../testing/outbox-crash-child.js";
import { createRecordingEventLog } from "../testing/recording-event-log.js";
import type { StorageSuite } from "./suite.js";
import {
  event,
  expectPerResourceOrder,
  inTransaction,
  readAll,
  readLog,
  unpublished,
} from "./support.js";

export function describeCrashContract(suite: StorageSuite): void {
  const { name, newEventLog, outboxSchema, startRelay } = suite;

  describe("crash safety (child process killed)", () => {
    const childPath = fileURLToPath(new URL("../testing/outbox-crash-child.ts", import.meta.url));
    const packageDir = fileURLToPath(new URL("../..", import.meta.url));

    /**
     * Runs the child until it dies. `onLine` sees every line it prints
     * (with the ids committed so far) and may kill it.
     */
    const runChild = (
      config: CrashChildConfig,
      onLine: (line: ChildLine, committed: string[], kill: () => void) => void = () => {},
    ): Promise<{ committed: string[]; signal: NodeJS.Signals | null }> =>
      new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", childPath], {
          cwd: packageDir,
          env: { ...process.env, TRELLIS_CRASH_CHILD: JSON.stringify(config) },
          stdio: ["ignore", "pipe", "inherit"],
        });
        const committed: string[] = [];
        let buffer = "";
        child.stdout.setEncoding("utf8");
        child.stdout.on("data", (chunk: string) => {
          buffer += chunk;
          const lines = buffer.split("\n");
          buffer = lines.pop() ?? "";
          for (const text of lines) {
            const line = JSON.parse(text) as ChildLine;
            if ("committed" in line) committed.push(...line.committed);
            onLine(line, committed, () => child.kill("SIGKILL"));
          }
        });
        child.on("error", reject);
        child.on("exit", (_code, signal) => resolve({ committed, signal }));
      });

    it("loses no event when the process is killed between commit and publish", async (ctx) => {
      if (suite.target.childConfig === undefined) return ctx.skip();
      const schema = await outboxSchema();
      const workspaceId = uniqueName("ws");
      const { committed, signal } = await runChild(
        {
          database: suite.target.childConfig,
          schema,
          workspaceId,
          mode: "commit",
          resources: 3,
          eventsPerTransaction: 4,
        },
        // Killed while it keeps committing: most likely mid-transaction.
        (_line, committed, kill) => committed.length >= 60 && kill(),
      );
      expect(signal).toBe("SIGKILL");
      const stored = await readAll(suite.database, schema);
      const storedIds = new Set(stored.map((s) => s.event.id));
      expect(committed.every((id) => storedIds.has(id))).toBe(true);
      // Transactions are atomic: whole transactions only, even the one killed mid-way.
      expect(stored.length % 4).toBe(0);
      expect(stored.every((s) => s.publishedAt === null)).toBe(true);

      const log = await newEventLog();
      startRelay(log, schema);
      await eventually(async () => (await unpublished(suite.database, schema)) === 0, {
        what: "everything published",
      });
      const published = await readLog(log, workspaceId);
      expect(published.map((e) => e.id)).toEqual(stored.map((s) => s.event.id));
      expectPerResourceOrder(published);
    });

    it("publishes once when the relay is killed after publishing, before marking", async (ctx) => {
      if (suite.target.childConfig === undefined) return ctx.skip();
      const schema = await outboxSchema();
      const workspaceId = uniqueName("ws");
      const dir = mkdtempSync(join(tmpdir(), "trellis-outbox-"));
      const logFile = join(dir, "log.jsonl");
      try {
        const { committed, signal } = await runChild({
          database: suite.target.childConfig,
          schema,
          workspaceId,
          mode: "relay-crash",
          resources: 3,
          eventsPerTransaction: 5,
          transactions: 6,
          batchSize: 5,
          crashAfterAppends: 3,
          logFile,
        });
        expect(signal).toBe("SIGKILL");
        expect(committed).toHaveLength(30);
        // Batches 1–2 were marked; batch 3 reached the log, not the outbox.
        expect(await unpublished(suite.database, schema)).toBe(20);
        // The durable log the child wrote survives it.
        const log = createRecordingEventLog({ file: logFile });
        expect(log.stats.stored).toBe(15);

        startRelay(log, schema, { batchSize: 5 });
        await eventually(async () => (await unpublished(suite.database, schema)) === 0, {
          what: "everything published",
        });
        expect(log.stats.duplicates).toBe(5);
        expect(log.stats.stored).toBe(30);
        const published = await readLog(log, workspaceId);
        expect(published.map((e) => e.id)).toEqual(committed);
        expectPerResourceOrder(published);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("hands the relay to a standby within moments when the active process dies", async (ctx) => {
      if (suite.target.childConfig === undefined) return ctx.skip();
      const schema = await outboxSchema();
      const log = await newEventLog();
      let standby: OutboxRelay | undefined;
      let standbyActiveBeforeKill: boolean | undefined;
      let killedAt = 0;
      const { signal } = await runChild(
        {
          database: suite.target.childConfig,
          schema,
          workspaceId: "ws_1",
          mode: "relay-hold",
          resources: 1,
          eventsPerTransaction: 1,
        },
        (line, _committed, kill) => {
          if (!("active" in line)) return;
          // The child leads; ours waits, then the child dies.
          standby = startRelay(log, schema, { pollIntervalMs: 60_000 });
          setTimeout(() => {
            standbyActiveBeforeKill = standby?.active;
            killedAt = performance.now();
            kill();
          }, 300);
        },
      );
      expect(signal).toBe("SIGKILL");
      expect(standbyActiveBeforeKill).toBe(false);
      await eventually(() => standby?.active, { what: "standby took over", intervalMs: 5 });
      console.info(
        `[storage contract ${name}] relay takeover after SIGKILL: ${(performance.now() - killedAt).toFixed(0)} ms`,
      );
      const workspaceId = uniqueName("ws");
      await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event(workspaceId, "task_h")]),
      );
      await eventually(async () => (await readLog(log, workspaceId)).length === 1, {
        what: "published by the standby",
      });
    });
  });
}
