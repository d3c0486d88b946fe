/**
 * `receipt_id` of a task. The receipts service issues a task's receipt after
 * the task ends (from its terminal event) and keeps it in its own store; the
 * tasks service never hears of it, so a task read from there has no receipt
 * id. A finished task without one gets it here, from the receipts service
 * (`ListTaskReceipts`), as the receipt whose subject is the task itself.
 *
 * A task's own receipt is issued once and never changes (the processor
 * issues it at most once per task), so once found it is remembered
 * ({@link TaskReceiptIndex}, per gateway replica, bounded): later reads of
 * the task cost no call. A finished task without a receipt yet (not issued
 * yet, or receipts disabled by policy) is asked about at most once per
 * {@link NEGATIVE_TTL_MS}, so a page re-read in a loop does not turn into
 * one call per task per read. Best effort and bounded: a receipts service
 * that is not deployed or does not answer within a second leaves the field
 * null, as before.
 *
 * REST (`GET /v1/tasks`, `GET /v1/tasks/{id}`) and gRPC / Connect
 * (`TaskService.GetTask` / `ListTasks`, {@link createTaskReceiptInterceptor})
 * share one index per gateway, so both surfaces give a task the same
 * `receipt_id`.
 */

import type { CallOptions, Interceptor } from "@connectrpc/connect";
import { TaskStatus } from "@trellis/contracts/core";
import { type Receipt, ReceiptService } from "@trellis/contracts/receipts";
import {
  type GetTaskResponse,
  type ListTasksResponse,
  type Task,
  TaskService,
} from "@trellis/contracts/tasks";
import { callerKey, setCallerHeaders } from "@trellis/platform";
import { requestIdHeader, requestIdKey } from "@trellis/runtime";
import type { RestCall, RoutePorts } from "../context.js";
import { receiptsServed } from "./discovery.js";

const CONCURRENCY = 8;
/**
 * How long "no receipt yet" is believed before the receipts service is asked
 * again. Zero by default: the receipts service issues a receipt soon after
 * the task ends — its consumer lets the batch holding the task's end linger
 * for more events first (`TRELLIS_RECEIPT_BATCH_LINGER`, 20 ms by default,
 * at most 1 s), so a task read right after it ends often has no receipt yet
 * and one read a little later has — and a client that saw it on
 * `GET /v1/receipts` must then see it on the task (Harn flow "receipts");
 * only found ids are remembered.
 */
export const NEGATIVE_TTL_MS = 0;
/** Task ids remembered per replica (found receipts and recent misses together). */
export const INDEX_CAPACITY = 50_000;
/** Pages of `ListTaskReceipts` read for one task (a task with many approvals has many). */
const MAX_PAGES = 5;
const finished = new Set([TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED]);

/** One page of a task's receipts, as `ListTaskReceipts` answers. */
export type ReceiptPageReader = (
  taskId: string,
  pageToken: string,
) => Promise<{ receipts: Receipt[]; nextPageToken: string }>;

/**
 * Task id → its own receipt id once issued; task id → when it was last seen
 * without one. Insertion-ordered map used as an LRU: a hit moves to the end,
 * the oldest entry goes when full.
 */
export class TaskReceiptIndex {
  readonly #entries = new Map<string, { receiptId: string } | { missAt: number }>();
  readonly #capacity: number;
  readonly #negativeTtlMs: number;
  readonly #now: () => number;

  constructor(options: { capacity?: number; negativeTtlMs?: number; now?: () => number } = {}) {
    this.#capacity = options.capacity ?? INDEX_CAPACITY;
    this.#negativeTtlMs = options.negativeTtlMs ?? NEGATIVE_TTL_MS;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * Fills `receiptId` of each finished task that has none: from memory, else
   * from `read` (at most `CONCURRENCY` tasks at a time). Returns `tasks`.
   */
  async fill(tasks: Task[], read: ReceiptPageReader): Promise<Task[]> {
    const ask: Task[] = [];
    const now = this.#now();
    for (const task of tasks) {
      if (task.receiptId !== "" || !finished.has(task.status)) continue;
      const entry = this.#entries.get(task.id);
      if (entry !== undefined && "receiptId" in entry) {
        this.#touch(task.id, entry);
        task.receiptId = entry.receiptId;
      } else if (entry === undefined || now - entry.missAt >= this.#negativeTtlMs) {
        ask.push(task);
      }
    }
    let next = 0;
    const worker = async () => {
      while (next < ask.length) {
        const task = ask[next++] as Task;
        const found = await ownReceipt(task.id, read);
        if (found === "error") continue; // not remembered: asked again next read
        if (found === undefined) this.#set(task.id, { missAt: this.#now() });
        else {
          this.#set(task.id, { receiptId: found });
          task.receiptId = found;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, ask.length) }, worker));
    return tasks;
  }

  #touch(key: string, value: { receiptId: string } | { missAt: number }): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
  }

  #set(key: string, value: { receiptId: string } | { missAt: number }): void {
    this.#touch(key, value);
    while (this.#entries.size > this.#capacity) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
  }
}

/** The id of the receipt whose subject is the task itself, `undefined` if none, `"error"` if unknown. */
async function ownReceipt(
  taskId: string,
  read: ReceiptPageReader,
): Promise<string | undefined | "error"> {
  let token = "";
  try {
    for (let page = 0; page < MAX_PAGES; page++) {
      const { receipts, nextPageToken } = await read(taskId, token);
      const own = receipts.find((r) => r.subject?.object === "task" && r.subject.id === taskId);
      if (own) return own.id;
      if (nextPageToken === "") return undefined;
      token = nextPageToken;
    }
    return undefined; // past MAX_PAGES: treated as not issued, asked again later
  } catch {
    // Not answering or busy: nothing is learnt.
    return "error";
  }
}

// One index per gateway (its ports object), as the discovery probe is kept.
const indexes = new WeakMap<object, TaskReceiptIndex>();

/** `tasks`, each finished one given its receipt id when the receipts service has it. */
export function withReceiptIds(call: RestCall, tasks: Task[]): Promise<Task[]> {
  return fillReceiptIds(call.ports, call.requestId, call.options(), tasks);
}

/**
 * {@link withReceiptIds} for any surface: `options` carry the caller (the
 * receipts service answers only what the caller may see).
 */
async function fillReceiptIds(
  ports: RoutePorts,
  requestId: string,
  options: CallOptions,
  tasks: Task[],
): Promise<Task[]> {
  if (!tasks.some((t) => t.receiptId === "" && finished.has(t.status))) return tasks;
  if (!(await receiptsServed(ports, requestId))) return tasks;
  let index = indexes.get(ports);
  if (index === undefined) {
    index = new TaskReceiptIndex();
    indexes.set(ports, index);
  }
  const client = ports.clients.get(ReceiptService);
  return index.fill(tasks, (taskId, pageToken) =>
    client.listTaskReceipts({ taskId, pageSize: 200, pageToken }, { ...options, timeoutMs: 1000 }),
  );
}

/**
 * Server interceptor of the public RPC surface: the tasks `TaskService.GetTask`
 * and `ListTasks` answer get their `receipt_id` as REST's do (the tasks
 * service does not know it). Placed after the auth interceptor (it reads the
 * caller), in both modes (embedded: around the tasks handlers; distributed:
 * around the forwarders).
 */
export function createTaskReceiptInterceptor(ports: RoutePorts): Interceptor {
  return (next) => async (req) => {
    const res = await next(req);
    if (res.stream || req.service.typeName !== TaskService.typeName) return res;
    let tasks: Task[] | undefined;
    if (req.method.name === TaskService.method.getTask.name) {
      const task = (res.message as GetTaskResponse).task;
      tasks = task ? [task] : undefined;
    } else if (req.method.name === TaskService.method.listTasks.name) {
      tasks = (res.message as ListTasksResponse).tasks;
    }
    if (tasks === undefined || tasks.length === 0) return res;
    const headers = new Headers();
    const caller = req.contextValues.get(callerKey);
    if (caller) setCallerHeaders(headers, caller);
    const requestId = req.contextValues.get(requestIdKey);
    if (requestId !== "") headers.set(requestIdHeader, requestId);
    await fillReceiptIds(ports, requestId, { headers, signal: req.signal }, tasks);
    return res;
  };
}
