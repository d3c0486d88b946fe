/**
 * `receipt_id` of a task. The receipts service issues a task's receipt after
 * the task ends (from its terminal event) and keeps it in its own store; the
 * tasks service never hears of it, so a task read from there has no receipt
 * id. A finished task without one gets it here, from the receipts service
 * (`ListTaskReceipts`), as the receipt whose subject is the task itself.
 * Best effort and bounded: a receipts service that is not deployed or does
 * not answer within a second leaves the field null, as before.
 */

import { TaskStatus } from "@trellis/contracts/core";
import { ReceiptService } from "@trellis/contracts/receipts";
import type { Task } from "@trellis/contracts/tasks";
import type { RestCall } from "../context.js";
import { receiptsAvailable } from "./discovery.js";

const CONCURRENCY = 8;
const finished = new Set([TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED]);

/** `tasks`, each finished one given its receipt id when the receipts service has it. */
export async function withReceiptIds(call: RestCall, tasks: Task[]): Promise<Task[]> {
  const missing = tasks.filter((t) => t.receiptId === "" && finished.has(t.status));
  if (missing.length === 0 || !(await receiptsAvailable(call))) return tasks;
  const client = call.ports.clients.get(ReceiptService);
  const options = call.options();
  const fill = async (task: Task) => {
    try {
      const { receipts } = await client.listTaskReceipts(
        { taskId: task.id, pageSize: 200 },
        { ...options, timeoutMs: 1000 },
      );
      const own = receipts.filter((r) => r.subject?.object === "task" && r.subject.id === task.id);
      const last = own.at(-1);
      if (last) task.receiptId = last.id;
    } catch {
      // Not issued yet, or the receipts service is busy: the field stays null.
    }
  };
  // A few reads at a time: a page may hold up to 1,000 tasks.
  let next = 0;
  const worker = async () => {
    while (next < missing.length) await fill(missing[next++] as Task);
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, missing.length) }, worker));
  return tasks;
}
