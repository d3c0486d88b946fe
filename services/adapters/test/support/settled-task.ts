/** Waiting on a task of the tasks service until it settles, for the adapters service's tests. */
import type { Client } from "@connectrpc/connect";
import { TaskStatus } from "@trellis/contracts/core";
import type { Task, TaskService } from "@trellis/contracts/tasks";
import { eventually } from "@trellis/testkit";

/** The statuses a task ends in. */
const FINAL_STATUSES: readonly TaskStatus[] = [
  TaskStatus.COMPLETED,
  TaskStatus.FAILED,
  TaskStatus.CANCELED,
];

/** Polls `taskId` until its status is one of `until` (by default any final one); the task then. */
export function settledTask(
  tasks: Pick<Client<typeof TaskService>, "getTask">,
  taskId: string,
  options: { timeoutMs: number; intervalMs?: number; until?: readonly TaskStatus[] },
): Promise<Task> {
  const until = options.until ?? FINAL_STATUSES;
  return eventually(
    async () => {
      const { task } = await tasks.getTask({ taskId });
      return task && until.includes(task.status) ? task : undefined;
    },
    {
      timeoutMs: options.timeoutMs,
      intervalMs: options.intervalMs,
      what: `task ${taskId} settled`,
    },
  );
}
