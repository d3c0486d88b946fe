import { TaskStatus } from "@trellis/contracts/core";

/** Whether a task status is terminal: COMPLETED, FAILED or CANCELED. */
export function isTerminalStatus(status: TaskStatus): boolean {
  return (
    status === TaskStatus.COMPLETED ||
    status === TaskStatus.FAILED ||
    status === TaskStatus.CANCELED
  );
}
