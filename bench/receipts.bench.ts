/**
 * Receipts benchmark: what does a receipt cost, and does the chain get
 * slower as it grows?
 *
 * (a) pure path, one thread (so: per core): build a representative task
 *     receipt (tool call, approval, model route, cost, artifact) from its
 *     folded facts, seal it (one RFC 8785 canonicalization, SHA-256, Ed25519
 *     signature), then verify the stored text (recognise it as canonical,
 *     re-hash, stored-form check, signature). Target: ≥ 5,000 issued +
 *     verified per second.
 * (b) database append path: `ReceiptStore.issue` (check the subject, seal
 *     against the remembered chain head, then one statement, no explicit
 *     transaction: insert, move the head, announce through the outbox) at a chain
 *     length of ~1k and again after the chain was grown to ~100k receipts
 *     (bulk-seeded rows, which also makes the remembered head stale once).
 *     Flat means the 100k cost is within noise of the 1k cost (no scan on
 *     append).
 *
 * (b) runs on PostgreSQL when one answers (TRELLIS_TEST_DATABASE_URL or
 * postgres://postgres@127.0.0.1:5432/postgres; a throwaway database), else
 * on in-memory PGlite. Run: `npx tsx bench/receipts.bench.ts`.
 */
import { generateKeyPairSync } from "node:crypto";
import { pathToFileURL } from "node:url";
import { create, fromJson, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ActorKind,
  type Event,
  EventSchema,
  type MessageSchema,
  Role,
  TaskStatus,
} from "@trellis/contracts/core";
import {
  buildTaskReceipt,
  eventHash,
  extractFacts,
  foldTaskFacts,
  merkleRoot,
  sealReceipt,
  signingKeyFromPem,
  signReceiptHash,
  type TaskSummary,
  verifyReceipt,
  verifyReceiptSignature,
} from "@trellis/receipts";
import {
  messageAppended,
  migrateReceipts,
  openPGliteDatabase,
  receiptStoreOn,
  toolResultMessage,
} from "@trellis/receipts/testing";
import { createDatabase, type Database } from "@trellis/storage";
import { sql } from "kysely";

/** Options of {@link runReceiptsBench}. */
export interface ReceiptsBenchOptions {
  /** Measured rounds of the pure path (default 5). */
  rounds?: number;
  /** Receipts per pure round (default 2000). */
  perRound?: number;
  /** Appends measured at each chain length (default 500). */
  appends?: number;
  /** Chain length of the second measurement (default 100,000). */
  longChain?: number;
  /** PostgreSQL server URL; unset: TRELLIS_TEST_DATABASE_URL, then the default, then PGlite. */
  databaseUrl?: string;
}

/** What {@link runReceiptsBench} measured. */
export interface ReceiptsBenchResult {
  receiptBytes: number;
  pure: {
    rounds: number;
    perRound: number;
    /** Median µs to build and seal one receipt. */
    issueUs: number;
    /** Median µs to verify one stored receipt. */
    verifyUs: number;
    /** Issued + verified receipts per second of wall time, one thread (median round). */
    issuedAndVerifiedPerSecond: number;
    /**
     * Issued + verified receipts per CPU-second of this thread (median round):
     * the per-core rate, unaffected by other processes competing for the CPU.
     */
    issuedAndVerifiedPerCpuSecond: number;
    roundsPerSecond: number[];
    roundsPerCpuSecond: number[];
    /** Baseline in the same run: raw Ed25519 sign + verify pairs per CPU-second. */
    rawSignVerifyPerCpuSecond: number;
    targetPerSecond: number;
  };
  append: {
    backend: "postgres" | "pglite";
    appends: number;
    /** µs per append with the chain at ~1k receipts. */
    at1kUs: number;
    /** µs per append with the chain at ~longChain receipts. */
    atLongUs: number;
    longChain: number;
    /** atLongUs / at1kUs: ~1 means flat. */
    ratio: number;
  };
}

function representativeEvents(taskId: string): Event[] {
  const base = Date.parse("2026-11-22T10:00:00Z");
  const events: Event[] = [];
  const add = (kind: string, payload: Event["payload"], actor = ActorKind.AGENT) => {
    const n = events.length + 1;
    events.push(
      create(EventSchema, {
        id: `evt_${taskId}_${n}`,
        kind,
        resource: { object: "task", id: taskId },
        workspaceId: "ws_bench",
        sessionId: "ses_bench",
        taskId,
        sequence: BigInt(n),
        createdAt: timestampFromDate(new Date(base + n * 1000)),
        actor: { id: actor === ActorKind.AGENT ? "agent_bench" : "user_1", kind: actor },
        ...(payload ? { payload } : {}),
      }),
    );
  };
  const status = (to: TaskStatus, from: TaskStatus) =>
    create(EventSchema, {
      payload: { kind: { case: "taskStatusChanged", value: { status: to, previousStatus: from } } },
    }).payload;
  const message = (init: MessageInitShape<typeof MessageSchema>) =>
    create(EventSchema, { payload: messageAppended(0n, init) }).payload;
  add("task.submitted", status(TaskStatus.SUBMITTED, TaskStatus.UNSPECIFIED), ActorKind.USER);
  add("task.started", status(TaskStatus.WORKING, TaskStatus.SUBMITTED));
  add(
    "agent.model_call",
    create(EventSchema, {
      payload: {
        kind: {
          case: "data",
          value: {
            provider: "openai",
            model: "gpt-bench",
            reason: "within budget",
            alternatives: [{ provider: "anthropic", model: "claude-bench" }],
            input_tokens: 1800,
            output_tokens: 420,
            cost_usd: 0.1842,
          },
        },
      },
    }).payload,
  );
  add(
    "agent.message",
    message({
      role: Role.ASSISTANT,
      toolCalls: [
        { id: "call_1", name: "git.apply_patch", arguments: fromJson(ValueSchema, { patch: "x" }) },
      ],
    }),
  );
  add(
    "user.tool_confirmation",
    create(EventSchema, {
      payload: {
        kind: {
          case: "signalDelivered",
          value: {
            signalId: `${taskId}:approve`,
            payload: fromJson(ValueSchema, { approved: true }),
          },
        },
      },
    }).payload,
    ActorKind.USER,
  );
  add("agent.tool_result", message(toolResultMessage("call_1", "ok")));
  add(
    "artifact.created",
    create(EventSchema, {
      payload: { kind: { case: "data", value: { artifact_id: "art_1", kind: "patch" } } },
    }).payload,
  );
  add("task.completed", status(TaskStatus.COMPLETED, TaskStatus.WORKING));
  return events;
}

function summaryOf(taskId: string): TaskSummary {
  const events = representativeEvents(taskId);
  return foldTaskFacts(
    taskId,
    events.map((e) => ({ eventId: e.id, eventHash: eventHash(e), facts: extractFacts(e, taskId) })),
  );
}

const issuer = { id: "trellis-bench", name: "Trellis", version: "agents-protocol-2026-04-25" };

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

async function openBenchDatabase(
  url: string | undefined,
): Promise<{ db: Database<unknown>; backend: "postgres" | "pglite"; close(): Promise<void> }> {
  const server =
    url ?? process.env.TRELLIS_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  try {
    const { createTestDatabase } = await import("@trellis/testkit");
    process.env.TRELLIS_TEST_DATABASE_URL ??= server;
    const test = await createTestDatabase("trellis_bench_receipts");
    const db = await createDatabase({ kind: "postgres", url: test.url });
    return {
      db,
      backend: "postgres",
      async close() {
        await db.close();
        await test.drop();
      },
    };
  } catch {
    const { db, close } = await openPGliteDatabase();
    return { db, backend: "pglite", close };
  }
}

/** Run the receipts benchmark (see the module comment). */
export async function runReceiptsBench(
  options: ReceiptsBenchOptions = {},
): Promise<ReceiptsBenchResult> {
  const rounds = options.rounds ?? 5;
  const perRound = options.perRound ?? 2000;
  const appends = options.appends ?? 500;
  const longChain = options.longChain ?? 100_000;
  const key = signingKeyFromPem(
    generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    "key_bench",
  );
  const summary = summaryOf("task_bench");
  const root = merkleRoot(summary.streamHashes);
  const seal = (i: number, previousHash: `sha256:${string}` | null) =>
    sealReceipt(
      buildTaskReceipt({
        receiptId: `rcpt_bench_${i}`,
        issuedAt: new Date(),
        issuer,
        keyId: key.keyId,
        workspaceId: "ws_bench",
        sessionId: "ses_bench",
        summary: { ...summary, taskId: `task_${i}` },
        agent: { agentId: "agent_bench", tier: "act_with_approval", backend: "builtin" },
        policy: "required",
        streamComplete: true,
        ...(root ? { merkleRoot: root } : {}),
      }),
      { previousHash, ...(root ? { merkleRoot: root } : {}), key, signedAt: new Date() },
    );
  const publicKey = () => key.publicKey;

  // (a) pure path.
  for (let i = 0; i < 500; i++) {
    const s = seal(i, null);
    verifyReceipt(s.text, { publicKey, storedText: s.text, storedHash: s.hash });
  }
  const issueUs: number[] = [];
  const verifyUs: number[] = [];
  const perSecond: number[] = [];
  const perCpuSecond: number[] = [];
  let receiptBytes = 0;
  for (let r = 0; r < rounds; r++) {
    let previous: `sha256:${string}` | null = null;
    let issuing = 0;
    let verifying = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < perRound; i++) {
      const a = performance.now();
      const s = seal(i, previous);
      const b = performance.now();
      const result = verifyReceipt(s.text, { publicKey, storedText: s.text, storedHash: s.hash });
      verifying += performance.now() - b;
      issuing += b - a;
      if (!result.valid)
        throw new Error(`bench receipt did not verify: ${result.problems[0]?.code}`);
      previous = s.hash;
      receiptBytes = s.text.length;
    }
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    perCpuSecond.push(perRound / ((cpu.user + cpu.system) / 1e6));
    issueUs.push((issuing * 1000) / perRound);
    verifyUs.push((verifying * 1000) / perRound);
    perSecond.push(perRound / (wall / 1000));
  }

  // Baseline: the signature alone, the floor under any receipt's cost.
  const baseline: number[] = [];
  const hashText = seal(0, null).hash;
  for (let r = 0; r < rounds; r++) {
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < perRound; i++) {
      const signature = signReceiptHash(hashText, key);
      verifyReceiptSignature(hashText, signature, key.publicKey);
    }
    const cpu = process.cpuUsage(cpu0);
    baseline.push(perRound / ((cpu.user + cpu.system) / 1e6));
  }

  // (b) database append path.
  const { db, backend, close } = await openBenchDatabase(options.databaseUrl);
  let at1kUs = 0;
  let atLongUs = 0;
  try {
    await migrateReceipts(db);
    const store = receiptStoreOn(db);
    let n = 0;
    const append = async () => {
      const i = n++;
      await store.issue({
        workspaceId: "ws_bench",
        kind: "task",
        subjectObject: "task",
        subjectId: `task_${i}`,
        taskId: `task_${i}`,
        sessionId: "ses_bench",
        seal: (previousHash) => seal(i, previousHash),
      });
    };
    const measure = async () => {
      const t0 = performance.now();
      for (let i = 0; i < appends; i++) await append();
      return ((performance.now() - t0) * 1000) / appends;
    };
    while (n < 1000) await append();
    at1kUs = await measure();
    // Grow the chain to ~longChain with bulk rows (same shape, distinct hashes),
    // continuing from the real head so later appends link as usual.
    const head = await store.chainHead("ws_bench");
    const from = Number(head.length) + 1;
    const to = longChain;
    if (to >= from) {
      await sql`
        insert into receipts.receipts (id, workspace_id, chain_index, kind, subject_object, subject_id,
          task_id, session_id, receipt_hash, previous_receipt_hash, key_id, final_state, issued_at, document)
        select 'rcpt_seed_' || i, 'ws_bench', i, 'task', 'task', 'seed_' || i, 'seed_' || i, 'ses_bench',
          'sha256:' || encode(sha256(('seed' || i)::bytea), 'hex'),
          case when i = ${from} then ${head.lastHash}
               else 'sha256:' || encode(sha256(('seed' || (i - 1))::bytea), 'hex') end,
          'key_bench', 'SUCCEEDED', now(), '{}'
        from generate_series(${from}::bigint, ${to}::bigint) as i`.execute(db.kysely);
      await sql`
        update receipts.chain_heads set length = ${to},
          last_receipt_id = ${`rcpt_seed_${to}`},
          last_receipt_hash = 'sha256:' || encode(sha256(('seed' || ${to}::bigint)::bytea), 'hex')
        where workspace_id = 'ws_bench'`.execute(db.kysely);
      await sql`analyze receipts.receipts`.execute(db.kysely);
    }
    for (let i = 0; i < 100; i++) await append();
    atLongUs = await measure();
  } finally {
    await close();
  }

  const medianPerSecond = median(perSecond);
  return {
    receiptBytes,
    pure: {
      rounds,
      perRound,
      issueUs: median(issueUs),
      verifyUs: median(verifyUs),
      issuedAndVerifiedPerSecond: medianPerSecond,
      issuedAndVerifiedPerCpuSecond: median(perCpuSecond),
      roundsPerSecond: perSecond,
      roundsPerCpuSecond: perCpuSecond,
      rawSignVerifyPerCpuSecond: median(baseline),
      targetPerSecond: 5000,
    },
    append: {
      backend,
      appends,
      at1kUs,
      atLongUs,
      longChain,
      ratio: atLongUs / at1kUs,
    },
  };
}

/** The result as the lines `npm run bench` prints. */
export function formatReceiptsBench(result: ReceiptsBenchResult): string {
  const { pure, append } = result;
  return [
    `receipts bench: ${pure.rounds} × ${pure.perRound} receipts of ${result.receiptBytes} B (median of rounds), one thread`,
    `(a) issue (build + canonicalize + hash + sign)      ${pure.issueUs.toFixed(1).padStart(7)} µs/receipt`,
    `    verify (parse + canonical-form check + hash + stored form + signature) ${pure.verifyUs.toFixed(1).padStart(7)} µs/receipt`,
    `    issued + verified per CPU-second (per core): ${Math.round(pure.issuedAndVerifiedPerCpuSecond)}  (target ≥ ${pure.targetPerSecond}; rounds: ${pure.roundsPerCpuSecond.map((x) => Math.round(x)).join(" ")})`,
    `    issued + verified per wall-second, one thread: ${Math.round(pure.issuedAndVerifiedPerSecond)}  (rounds: ${pure.roundsPerSecond.map((x) => Math.round(x)).join(" ")})`,
    `    baseline, raw Ed25519 sign + verify per CPU-second: ${Math.round(pure.rawSignVerifyPerCpuSecond)}  (receipt / raw: ${(pure.issuedAndVerifiedPerCpuSecond / pure.rawSignVerifyPerCpuSecond).toFixed(2)})`,
    `(b) chain append on ${append.backend} (one statement each, ${append.appends} appends):`,
    `    at ~1k receipts   ${append.at1kUs.toFixed(0).padStart(6)} µs/append`,
    `    at ~${Math.round(append.longChain / 1000)}k receipts ${append.atLongUs.toFixed(0).padStart(6)} µs/append   ratio ${append.ratio.toFixed(2)} (flat ≈ 1)`,
  ].join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runReceiptsBench();
  console.log(formatReceiptsBench(result));
}
