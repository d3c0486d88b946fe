// A restart misses nothing and issues nothing twice: on real PostgreSQL and
// JetStream, the receipts service is stopped during a burst of 500 tasks
// reaching their end and started again; exactly 500 receipts come out, on a
// gap-free chain per workspace, every one verifying.
import { createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ReceiptService } from "@trellis/contracts/receipts";
import {
  createMeshClientInterceptor,
  processMeshCredentials,
  type RunningService,
  runService,
  type ServiceContext,
} from "@trellis/platform";
import { eventually } from "@trellis/testkit";
import { openDeployment, type TestDeployment } from "@trellis/testkit/deployment";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresReceiptStore, receiptsService, sealReceipt, verifyReceipt } from "../src/index.js";
import { newKey, receiptOf } from "../src/testing/receipt-helpers.js";
import { appendEvents, producerService, taskEvents } from "./support.js";

const TASKS = 500;
const WORKSPACES = ["ws_r1", "ws_r2"];

describe("receipts service restart (PostgreSQL + JetStream)", () => {
  let deployment: TestDeployment<Parameters<typeof runService>[0], RunningService>;
  let env: Readonly<Record<string, string>>;
  let receipts: RunningService | undefined;
  let producerCtx: ServiceContext | undefined;
  let admin: pg.Client;

  beforeAll(async () => {
    deployment = await openDeployment("trellis_receipts", runService, {
      prefix: "rcpt",
      env: {
        TRELLIS_SHUTDOWN_GRACE: "500ms",
        // Nothing listens here: agents cannot be read, receipts use defaults.
        TRELLIS_TASKS_URL: "http://127.0.0.1:9",
        TRELLIS_RECEIPT_SIGNING_KEY: generateKeyPairSync("ed25519")
          .privateKey.export({ type: "pkcs8", format: "pem" })
          .toString(),
        TRELLIS_RECEIPT_KEY_ID: "key_restart",
        TRELLIS_RECEIPT_ACK_WAIT: "2s",
        TRELLIS_LOG_LEVEL: "warn",
      },
    });
    env = deployment.env;
    await deployment.start(producerService((ctx) => (producerCtx = ctx)));
    receipts = await deployment.start(receiptsService);
    admin = new pg.Client({ connectionString: deployment.db.url });
    await admin.connect();
  }, 60_000);

  afterAll(async () => {
    await admin?.end();
    await deployment?.close();
  });

  async function count(): Promise<number> {
    const result = await admin.query("select count(*)::int as n from receipts.receipts");
    return result.rows[0].n as number;
  }

  it("issues exactly one receipt per task across a stop in the middle of a burst", async () => {
    // The burst: 500 tasks, 20 per transaction, alternating workspaces.
    const burst = (async () => {
      for (let i = 0; i < TASKS; i += 20) {
        const events = [];
        for (let j = i; j < Math.min(i + 20, TASKS); j++) {
          events.push(
            ...taskEvents({
              taskId: `task_${String(j).padStart(4, "0")}`,
              workspaceId: WORKSPACES[j % WORKSPACES.length] as string,
              final: j % 7 === 0 ? "FAILED" : j % 11 === 0 ? "CANCELED" : "COMPLETED",
            }),
          );
        }
        await appendEvents(producerCtx as ServiceContext, events);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();

    // Stop the receipts service once it is under way, while the burst goes on.
    await eventually(async () => (await count()) >= 60, {
      timeoutMs: 30_000,
      what: "the first receipts",
    });
    await receipts?.close();
    receipts = undefined;
    const atStop = await count();
    await burst;
    expect(atStop).toBeLessThan(TASKS);

    const restartedAt = performance.now();
    receipts = await deployment.start(receiptsService);
    // Batched, this takes seconds; generous because CI machines are shared.
    await eventually(async () => (await count()) >= TASKS, {
      timeoutMs: 60_000,
      intervalMs: 100,
      what: `${TASKS} receipts`,
    });
    console.log(
      `receipts restart: ${TASKS - atStop} receipts caught up in ${Math.round(performance.now() - restartedAt)} ms`,
    );
    // Let redeliveries of anything handed out before the stop come and go.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await count()).toBe(TASKS);

    const subjects = await admin.query(
      "select count(distinct subject_id)::int as n from receipts.receipts where kind = 'task'",
    );
    expect(subjects.rows[0].n).toBe(TASKS);

    // Gap-free chain per workspace: positions 1…n, each linking to the one before.
    for (const workspace of WORKSPACES) {
      const rows = (
        await admin.query(
          "select chain_index::int as i, receipt_hash, previous_receipt_hash from receipts.receipts where workspace_id = $1 order by chain_index",
          [workspace],
        )
      ).rows as { i: number; receipt_hash: string; previous_receipt_hash: string | null }[];
      expect(rows.length).toBe(TASKS / WORKSPACES.length);
      rows.forEach((row, k) => {
        expect(row.i).toBe(k + 1);
        expect(row.previous_receipt_hash).toBe(k === 0 ? null : rows[k - 1]?.receipt_hash);
      });
      const head = await admin.query(
        "select length::int as n, last_receipt_hash from receipts.chain_heads where workspace_id = $1",
        [workspace],
      );
      expect(head.rows[0]).toEqual({
        n: rows.length,
        last_receipt_hash: rows.at(-1)?.receipt_hash,
      });
    }

    // Every receipt verifies through the service.
    const client = createClient(
      ReceiptService,
      createGrpcTransport({
        baseUrl: (receipts as RunningService).address.url,
        // A direct call, as another mesh service would make it (service credentials).
        interceptors: [createMeshClientInterceptor(processMeshCredentials(), "test")],
      }),
    );
    const ids = (await admin.query("select id from receipts.receipts")).rows as { id: string }[];
    for (const { id } of ids) {
      const result = await client.verifyReceipt({ target: { case: "receiptId", value: id } });
      expect(result.problems).toEqual([]);
    }
  }, 120_000);

  it("two replicas share the burst: one receipt per task, gap-free chains", async () => {
    // Both replicas compete for the same durable consumer and append to the
    // same chains, each with its own remembered heads.
    const second = await deployment.start(receiptsService);
    const workspaces = ["ws_p1", "ws_p2"];
    const tasks = 300;
    try {
      for (let i = 0; i < tasks; i += 20) {
        const events = [];
        for (let j = i; j < Math.min(i + 20, tasks); j++) {
          events.push(
            ...taskEvents({
              taskId: `task_p${String(j).padStart(4, "0")}`,
              workspaceId: workspaces[j % workspaces.length] as string,
            }),
          );
        }
        await appendEvents(producerCtx as ServiceContext, events);
      }
      const issued = async () =>
        (
          await admin.query(
            "select count(*)::int as n from receipts.receipts where workspace_id = any($1)",
            [workspaces],
          )
        ).rows[0].n as number;
      await eventually(async () => (await issued()) >= tasks, {
        timeoutMs: 120_000,
        intervalMs: 250,
        what: `${tasks} receipts from two replicas`,
      });
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await issued()).toBe(tasks);
    } finally {
      await second.close();
    }
    const key = createPublicKey(createPrivateKey(env.TRELLIS_RECEIPT_SIGNING_KEY as string));
    for (const workspace of workspaces) {
      const rows = (
        await admin.query(
          "select chain_index::int as i, receipt_hash, previous_receipt_hash, document from receipts.receipts where workspace_id = $1 order by chain_index",
          [workspace],
        )
      ).rows as {
        i: number;
        receipt_hash: string;
        previous_receipt_hash: string | null;
        document: string;
      }[];
      expect(rows).toHaveLength(tasks / workspaces.length);
      rows.forEach((row, k) => {
        expect(row.i).toBe(k + 1);
        expect(row.previous_receipt_hash).toBe(k === 0 ? null : rows[k - 1]?.receipt_hash);
        const result = verifyReceipt(row.document, {
          publicKey: () => key,
          storedText: row.document,
          storedHash: row.receipt_hash,
          chain: { previousHash: k === 0 ? null : (rows[k - 1]?.receipt_hash as string) },
        });
        expect(result.problems).toEqual([]);
      });
    }
  }, 180_000);

  it("never forks the chain when replicas issue at the same time", async () => {
    const { createDatabase, createOutboxWriter } = await import("@trellis/storage");
    const key = newKey("key_concurrent");
    const template = receiptOf(taskEvents({ taskId: "task_c", sequenced: true }), key).document;
    const { chain: _chain, signatures: _signatures, ...unsigned } = template;
    // Two pools, as two replicas would have.
    const replicas = await Promise.all(
      [0, 1].map(() => createDatabase({ kind: "postgres", url: deployment.db.url, poolSize: 8 })),
    );
    const stores = replicas.map(
      (database) =>
        new PostgresReceiptStore({
          database,
          schema: "receipts",
          outbox: createOutboxWriter({ schema: "receipts" }),
        }),
    );
    try {
      await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          (stores[i % 2] as PostgresReceiptStore).issue({
            workspaceId: "ws_concurrent",
            kind: "task",
            subjectObject: "task",
            // Every subject twice: the second attempt must find the first.
            subjectId: `task_c${i % 30}`,
            taskId: `task_c${i % 30}`,
            sessionId: "ses_c",
            seal: (previousHash) =>
              sealReceipt(
                {
                  ...unsigned,
                  receipt_id: `rcpt_c${i}`,
                  subject: { object: "task", id: `task_c${i % 30}` },
                },
                { previousHash, key, signedAt: new Date() },
              ),
          }),
        ),
      );
    } finally {
      await Promise.all(replicas.map((r) => r.close()));
    }
    const rows = (
      await admin.query(
        "select chain_index::int as i, receipt_hash, previous_receipt_hash from receipts.receipts where workspace_id = 'ws_concurrent' order by chain_index",
      )
    ).rows as { i: number; receipt_hash: string; previous_receipt_hash: string | null }[];
    expect(rows).toHaveLength(30);
    // They did race (a stale remembered head), and the loser redid its append.
    expect(stores.reduce((n, store) => n + store.conflicts, 0)).toBeGreaterThan(0);
    rows.forEach((row, k) => {
      expect(row.i).toBe(k + 1);
      expect(row.previous_receipt_hash).toBe(k === 0 ? null : rows[k - 1]?.receipt_hash);
    });
  });
});
