/**
 * Shared machinery of the fault suites: a load of chat turns and tasks sent
 * through the gateway the way a careful client does (same idempotency key on
 * every retry, retry only what is retryable), and the checks that must hold
 * after any fault: nothing accepted is lost or duplicated, every task ends,
 * every transcript is in order, the receipt chain has no gap.
 *
 * Sizes come from the environment so CI runs a small load and a nightly run a
 * large one with the same checks:
 *   TRELLIS_FAULT_SIZE   chat turns and tasks in flight per fault (default 6; nightly 200)
 *   TRELLIS_FAULT_TURNS  sequential chat turns per session (default 2)
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService, ErrorBucket } from "@trellis/contracts/chat";
import { type Message, Role, TaskStatus } from "@trellis/contracts/core";
import { ReceiptService } from "@trellis/contracts/receipts";
import { AgentService, SessionService, TaskService } from "@trellis/contracts/tasks";
import { type ClientsOf, createClients } from "@trellis/runtime";
import { bearer, eventually, uniqueName } from "@trellis/testkit";
import { expect } from "vitest";
import { type Mesh, parseTogether, startMesh } from "../../src/mesh.js";

export const faultSize = Number(process.env.TRELLIS_FAULT_SIZE ?? 6);
export const turnsPerSession = Number(process.env.TRELLIS_FAULT_TURNS ?? 2);
export const apiKey = "trellis-fault-admin-key-0123456789abcdef";

/** Env every fault mesh runs with: short leases so a lost turn is recovered fast. */
export const faultMeshEnv: Record<string, string> = {
  TRELLIS_API_KEY: apiKey,
  TRELLIS_LOG_LEVEL: "warn",
  TRELLIS_TASKS_LEASE: "2s",
  TRELLIS_TASKS_SWEEP: "250ms",
  TRELLIS_STARTUP_TIMEOUT: "60s",
};

/** Connect codes a client may see during a fault and retry with the same key. */
export const retryableCodes = new Set<Code>([
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.Aborted,
  Code.ResourceExhausted,
  Code.Canceled,
]);

/** The services the fault suites call through the gateway. */
const GATEWAY_SERVICES = {
  agents: AgentService,
  chat: ChatService,
  tasks: TaskService,
  sessions: SessionService,
  receipts: ReceiptService,
};

export type Clients = ClientsOf<typeof GATEWAY_SERVICES>;

export function gatewayClients(gatewayUrl: string): Clients {
  const transport = createGrpcTransport({ baseUrl: gatewayUrl, interceptors: [bearer(apiKey)] });
  return createClients(transport, GATEWAY_SERVICES);
}

/** Where a fault mesh keeps its state: a database, a NATS server and a prefix of its own. */
export interface FaultMeshPlace {
  databaseUrl: string;
  natsUrl: string;
  natsPrefix: string;
}

/**
 * Services the fault meshes run in one process (`TRELLIS_FAULT_TOGETHER`,
 * read as `trellis mesh` reads TRELLIS_MESH_TOGETHER, e.g. `tasks,chat`;
 * default every service apart, so each can be killed alone).
 */
export const faultTogether = parseTogether(process.env.TRELLIS_FAULT_TOGETHER || "none");

/** A mesh as every fault suite runs it ({@link faultMeshEnv}), and clients of its gateway. */
export async function startFaultMesh(
  place: FaultMeshPlace,
): Promise<{ mesh: Mesh; clients: Clients }> {
  const mesh = await startMesh({
    ...place,
    env: faultMeshEnv,
    together: faultTogether,
    readyTimeoutMs: 60_000,
  });
  return { mesh, clients: gatewayClients(mesh.urls.gateway as string) };
}

/** A scripted agent that echoes its input after `delayMs`; safe to re-run after a crash. */
export async function createEchoAgent(clients: Clients, delayMs: number): Promise<string> {
  const { agent } = await retrying(() =>
    clients.agents.createAgent({
      agent: {
        workspaceId: "default",
        name: uniqueName("echo"),
        backend: "scripted",
        safeToRetry: true,
        definition: {
          entry: "reply",
          nodes: {
            reply: {
              update: {
                messages: [{ role: "assistant", content: "echo {{input}}" }],
                delay_ms: delayMs,
              },
            },
          },
        },
      },
    }),
  );
  if (!agent) throw new Error("no agent");
  return agent.id;
}

const text = (t: string): Message =>
  ({ role: Role.USER, parts: [{ kind: { case: "text", value: { text: t } } }] }) as Message;

export function textOf(message: Message | undefined): string {
  return (message?.parts ?? [])
    .map((p) => (p.kind.case === "text" ? p.kind.value.text : ""))
    .join("");
}

/** What the clients saw. */
export interface LoadRecord {
  /** Chat sessions and the texts whose turn was accepted (completed), in send order. */
  chat: Map<string, string[]>;
  /** Task id per accepted SubmitTask (one session each), with its input text. */
  tasks: Map<string, { sessionId: string; text: string }>;
  /** Errors seen and retried, by Connect code name or chat error category. */
  retried: Map<string, number>;
  /** Errors a client must never see (not retryable). */
  unexpected: string[];
}

export function newRecord(): LoadRecord {
  return { chat: new Map(), tasks: new Map(), retried: new Map(), unexpected: [] };
}

const bump = (record: LoadRecord | undefined, key: string) =>
  record?.retried.set(key, (record.retried.get(key) ?? 0) + 1);

/**
 * Call `fn` until it succeeds, retrying retryable errors (the caller keeps
 * the idempotency key the same); anything else is recorded and thrown.
 */
export async function retrying<T>(
  fn: () => Promise<T>,
  record?: LoadRecord,
  deadlineMs = 120_000,
): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      const e = ConnectError.from(error);
      if (!retryableCodes.has(e.code) || Date.now() > deadline) {
        record?.unexpected.push(`${Code[e.code]}: ${e.rawMessage}`);
        throw e;
      }
      bump(record, Code[e.code]);
      await new Promise((r) => setTimeout(r, 150));
    }
  }
}

/** One load sent during a fault round: its `size` sessions are named after `tag`. */
export interface Load {
  clients: Clients;
  agentId: string;
  size: number;
  /** Where what the load saw is recorded. */
  record: LoadRecord;
  tag: string;
}

/** `turnsPerSession` chat turns in each of `size` sessions, the sessions in parallel. */
export async function chatLoad({ clients, agentId, size, record, tag }: Load): Promise<void> {
  await Promise.all(
    Array.from({ length: size }, async (_, i) => {
      const sessionId = `ses_${tag}_${i}`;
      const accepted: string[] = [];
      record.chat.set(sessionId, accepted);
      // An error that is not retryable is recorded by retrying() and ends
      // this session's turns; verifyInvariants() reports it.
      await sessionTurns(sessionId, i, accepted).catch(() => {});
    }),
  );

  async function sessionTurns(sessionId: string, i: number, accepted: string[]): Promise<void> {
    for (let turn = 0; turn < turnsPerSession; turn++) {
      const input = `${tag} chat ${i}.${turn}`;
      const key = `${sessionId}-${turn}`;
      for (;;) {
        const { outcome } = await retrying(
          () =>
            clients.chat.send({ sessionId, agentId, idempotencyKey: key, message: text(input) }),
          record,
        );
        const kind = outcome?.kind;
        if (kind?.case === "completed") {
          const reply = textOf(kind.value.replies[0]);
          if (reply !== `echo ${input}`) record.unexpected.push(`wrong reply ${reply} to ${input}`);
          accepted.push(input);
          break;
        }
        if (
          kind?.case === "errored" &&
          kind.value.errorBucket === ErrorBucket.RETRYABLE_TRANSIENT
        ) {
          bump(record, `chat:${kind.value.errorCategory}`);
          await new Promise((r) => setTimeout(r, 150));
          continue;
        }
        record.unexpected.push(
          `chat turn ${input}: ${JSON.stringify(kind?.case)} ${kind?.case === "errored" ? kind.value.errorCategory : ""}`,
        );
        return;
      }
    }
  }
}

/** `size` tasks, each in its own new session, submitted in parallel. */
export async function taskLoad({ clients, agentId, size, record, tag }: Load): Promise<void> {
  await Promise.all(
    Array.from({ length: size }, async (_, i) => {
      const sessionId = `ses_${tag}_task_${i}`;
      const input = `${tag} task ${i}`;
      try {
        const { task } = await retrying(
          () =>
            clients.tasks.submitTask({
              sessionId,
              createSession: true,
              workspaceId: "default",
              agentId,
              idempotencyKey: `${sessionId}-submit`,
              input: text(input),
            }),
          record,
        );
        if (task) record.tasks.set(task.id, { sessionId, text: input });
      } catch {
        // Recorded as unexpected by retrying().
      }
    }),
  );
}

const terminal = new Set([TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED]);

/** Every item of a paged list, each page read with {@link retrying}. */
async function allPages<Page extends { nextPageToken: string }, Item>(
  read: (pageToken: string) => Promise<Page>,
  items: (page: Page) => Item[],
): Promise<Item[]> {
  const out: Item[] = [];
  let pageToken = "";
  do {
    const page = await retrying(() => read(pageToken));
    out.push(...items(page));
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return out;
}

const allMessages = (clients: Clients, sessionId: string) =>
  allPages(
    (pageToken) => clients.sessions.listMessages({ sessionId, pageSize: 1000, pageToken }),
    (page) => page.messages,
  );

const allTasks = (clients: Clients, sessionId: string) =>
  allPages(
    (pageToken) =>
      clients.tasks.listTasks({ sessionId, workspaceId: "default", pageSize: 1000, pageToken }),
    (page) => page.tasks,
  );

/** The session's tasks, once every one of them has ended. */
const endedTasks = (clients: Clients, sessionId: string, what: string) =>
  eventually(
    async () => {
      const list = await allTasks(clients, sessionId);
      return list.every((t) => terminal.has(t.status)) ? list : undefined;
    },
    { timeoutMs: 60_000, what },
  );

/** Figures of one verification. */
export interface Verified {
  sessions: number;
  tasks: number;
  completed: number;
  failed: number;
  receipts: number;
}

/**
 * The invariants after a fault, once the mesh is whole again:
 * - every chat session holds exactly its accepted turns, once each, in send
 *   order, each user message followed by its echo;
 * - every accepted task exists once in its session, ends (COMPLETED, or FAILED
 *   for a turn that could not be re-run), and a completed one has its reply;
 * - the workspace's receipt chain is gap-free and linked, one receipt per
 *   ended task, and the newest receipts verify.
 */
export async function verifyInvariants(clients: Clients, record: LoadRecord): Promise<Verified> {
  expect(record.unexpected).toEqual([]);
  const ended: string[] = [];
  let completed = 0;
  let failed = 0;

  for (const [sessionId, accepted] of record.chat) {
    const tasks = await endedTasks(clients, sessionId, `every task of ${sessionId} ended`);
    // One task per accepted turn: a retried Send is the same task.
    expect(tasks.map((t) => textOf(t.input)).sort()).toEqual([...accepted].sort());
    for (const t of tasks) ended.push(t.id);
    const messages = await allMessages(clients, sessionId);
    const expected = accepted.flatMap((input) => [input, `echo ${input}`]);
    expect(
      messages.map((m) => textOf(m.message)),
      `transcript of ${sessionId}`,
    ).toEqual(expected);
    const positions = messages.map((m) => Number(m.position));
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    completed += tasks.filter((t) => t.status === TaskStatus.COMPLETED).length;
  }

  for (const [taskId, { sessionId, text: input }] of record.tasks) {
    const tasks = await endedTasks(clients, sessionId, `task ${taskId} ended`);
    expect(tasks.map((t) => t.id)).toEqual([taskId]); // not lost, not duplicated
    const task = tasks[0];
    ended.push(taskId);
    const messages = (await allMessages(clients, sessionId)).map((m) => textOf(m.message));
    if (task?.status === TaskStatus.COMPLETED) {
      completed++;
      expect(messages).toEqual([input, `echo ${input}`]);
    } else {
      failed++;
      // A turn that could not be re-run fails cleanly: no half reply, a reason.
      expect(task?.status).toBe(TaskStatus.FAILED);
      expect(task?.failure?.category).not.toBe("");
      expect(messages[0]).toBe(input);
    }
  }

  // The receipt chain: receipts are issued asynchronously (durable consumer).
  const receipts = await eventually(
    async () => {
      const list = await allPages(
        (pageToken) =>
          clients.receipts.listReceipts({ workspaceId: "default", pageSize: 500, pageToken }),
        (page) => page.receipts,
      );
      const covered = new Set(list.map((r) => r.taskId));
      return ended.every((id) => covered.has(id)) ? list : undefined;
    },
    { timeoutMs: 60_000, what: "a receipt for every ended task" },
  );
  receipts.forEach((r, i) => {
    expect(Number(r.chainIndex), "chain index without gap").toBe(i + 1);
    expect(r.previousReceiptHash).toBe(i === 0 ? "" : receipts[i - 1]?.receiptHash);
  });
  const perTask = new Map<string, number>();
  for (const r of receipts) perTask.set(r.taskId, (perTask.get(r.taskId) ?? 0) + 1);
  for (const id of ended) expect(perTask.get(id), `receipts of ${id}`).toBe(1);
  for (const r of receipts.slice(-3)) {
    const verdict = await retrying(() =>
      clients.receipts.verifyReceipt({ target: { case: "receiptId", value: r.id } }),
    );
    expect(verdict.valid, JSON.stringify(verdict.problems)).toBe(true);
  }
  return {
    sessions: record.chat.size + record.tasks.size,
    tasks: ended.length,
    completed,
    failed,
    receipts: receipts.length,
  };
}

/**
 * Resolve once the load is under way (some chat turn accepted), and check it
 * is not over yet: the fault that follows must land on work in flight.
 */
export async function underWay(record: LoadRecord, size: number): Promise<void> {
  const accepted = () => [...record.chat.values()].reduce((n, list) => n + list.length, 0);
  await eventually(() => accepted() > 0, { timeoutMs: 30_000, what: "the load under way" });
  expect(accepted(), "chat turns still in flight at the fault").toBeLessThan(
    size * turnsPerSession,
  );
}

/**
 * One fault round: the load of chat turns and tasks (`faultSize` of each,
 * named after `tag`) sent to the agent, `fault` once it is under way, then the
 * invariants — and every task of the load accounted for.
 */
export async function faultUnderLoad(
  clients: Clients,
  agentId: string,
  tag: string,
  fault: () => Promise<void>,
): Promise<{ verified: Verified; record: LoadRecord }> {
  const record = newRecord();
  const sent: Load = { clients, agentId, size: faultSize, record, tag };
  const load = Promise.all([chatLoad(sent), taskLoad(sent)]);
  await underWay(record, faultSize);
  await fault();
  await load;
  const verified = await verifyInvariants(clients, record);
  expect(verified.tasks).toBe(faultSize * turnsPerSession + faultSize);
  return { verified, record };
}

/** A printable line of what a fault round saw. */
export function summary(name: string, ms: number, v: Verified, record: LoadRecord): string {
  const retried = [...record.retried].map(([k, n]) => `${k}×${n}`).join(" ") || "none";
  return `[faults] ${name}: ${ms} ms; ${v.tasks} tasks (${v.completed} completed, ${v.failed} failed cleanly) in ${v.sessions} sessions; receipts ${v.receipts}; retried: ${retried}`;
}
