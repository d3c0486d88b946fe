// `receipt_id` on task reads (issue 22): remembered once issued, so a read
// costs no ListTaskReceipts call; a miss is asked about again only after a TTL.
import { create } from "@bufbuild/protobuf";
import { TaskStatus } from "@trellis/contracts/core";
import { type Receipt, ReceiptSchema } from "@trellis/contracts/receipts";
import { type Task, TaskSchema } from "@trellis/contracts/tasks";
import { describe, expect, it } from "vitest";
import { type ReceiptPageReader, TaskReceiptIndex } from "../src/http/routes/task-receipts.js";

const task = (id: string, status = TaskStatus.COMPLETED): Task =>
  create(TaskSchema, { id, status });
const receipt = (id: string, object: string, subjectId: string): Receipt =>
  create(ReceiptSchema, { id, subject: { object, id: subjectId } });

/** A receipts service holding `issued` (task id → its receipts), counting calls. */
function reader(issued: Map<string, Receipt[]>, pageSize = 200) {
  const calls: string[] = [];
  const read: ReceiptPageReader = async (taskId, pageToken) => {
    calls.push(taskId);
    const all = issued.get(taskId) ?? [];
    const start = pageToken === "" ? 0 : Number(pageToken);
    const end = start + pageSize;
    return {
      receipts: all.slice(start, end),
      nextPageToken: end < all.length ? String(end) : "",
    };
  };
  return { read, calls };
}

describe("TaskReceiptIndex", () => {
  it("asks once per task, then answers from memory", async () => {
    const issued = new Map([["tsk_a", [receipt("rcpt_a", "task", "tsk_a")]]]);
    const { read, calls } = reader(issued);
    const index = new TaskReceiptIndex();
    const [first] = await index.fill([task("tsk_a")], read);
    expect(first?.receiptId).toBe("rcpt_a");
    for (let i = 0; i < 5; i++) {
      const [again] = await index.fill([task("tsk_a")], read);
      expect(again?.receiptId).toBe("rcpt_a");
    }
    expect(calls).toEqual(["tsk_a"]);
  });

  it("skips tasks still running and tasks that already carry one", async () => {
    const { read, calls } = reader(new Map());
    const index = new TaskReceiptIndex();
    const carried = task("tsk_c");
    carried.receiptId = "rcpt_c";
    const tasks = await index.fill(
      [task("tsk_r", TaskStatus.WORKING), task("tsk_q", TaskStatus.INPUT_REQUIRED), carried],
      read,
    );
    expect(calls).toEqual([]);
    expect(tasks.map((t) => t.receiptId)).toEqual(["", "", "rcpt_c"]);
  });

  it("remembers a miss only for the TTL, then finds the receipt once issued", async () => {
    let now = 1_000;
    const issued = new Map<string, Receipt[]>();
    const { read, calls } = reader(issued);
    const index = new TaskReceiptIndex({ negativeTtlMs: 5_000, now: () => now });
    expect((await index.fill([task("tsk_b")], read))[0]?.receiptId).toBe("");
    now += 4_999;
    expect((await index.fill([task("tsk_b")], read))[0]?.receiptId).toBe("");
    expect(calls).toHaveLength(1);
    issued.set("tsk_b", [receipt("rcpt_b", "task", "tsk_b")]);
    now += 1;
    expect((await index.fill([task("tsk_b")], read))[0]?.receiptId).toBe("rcpt_b");
    expect((await index.fill([task("tsk_b")], read))[0]?.receiptId).toBe("rcpt_b");
    expect(calls).toHaveLength(2);
  });

  it("takes the task's own receipt, past approval receipts and pages", async () => {
    const approvals = Array.from({ length: 450 }, (_, i) =>
      receipt(`rcpt_ap${i}`, "approval", `evt_${i}`),
    );
    const issued = new Map([["tsk_d", [...approvals, receipt("rcpt_d", "task", "tsk_d")]]]);
    const { read, calls } = reader(issued);
    const [filled] = await new TaskReceiptIndex().fill([task("tsk_d", TaskStatus.FAILED)], read);
    expect(filled?.receiptId).toBe("rcpt_d");
    expect(calls).toHaveLength(3);
  });

  it("learns nothing from a failed call, and stays within its capacity", async () => {
    let failing = true;
    const calls: string[] = [];
    const read: ReceiptPageReader = async (taskId) => {
      calls.push(taskId);
      if (failing) throw new Error("unavailable");
      return { receipts: [receipt(`rcpt_${taskId}`, "task", taskId)], nextPageToken: "" };
    };
    const index = new TaskReceiptIndex({ capacity: 3 });
    expect((await index.fill([task("t1")], read))[0]?.receiptId).toBe("");
    expect(index.size).toBe(0);
    failing = false;
    const filled = await index.fill(
      ["t1", "t2", "t3", "t4", "t5"].map((id) => task(id)),
      read,
    );
    expect(filled.map((t) => t.receiptId)).toEqual([
      "rcpt_t1",
      "rcpt_t2",
      "rcpt_t3",
      "rcpt_t4",
      "rcpt_t5",
    ]);
    expect(index.size).toBe(3);
    // The oldest were forgotten: t1 is asked again, t5 is not.
    calls.length = 0;
    await index.fill([task("t1"), task("t5")], read);
    expect(calls).toEqual(["t1"]);
  });
});
