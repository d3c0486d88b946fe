/** @trellis/tasks: sessions, tasks, the per-session mailbox and signals (trellis.tasks.v1). */
export { SUMMARY_INSTRUCTION } from "./compaction/model-summary.js";
export { type TasksConfig, tasksConfigSchema } from "./config.js";
export { createTasksService, type TasksServiceOptions, tasksService } from "./definition.js";
export { canTransition, isSuspended, isTerminal, transition } from "./domain/lifecycle.js";
export { signalIdFor } from "./domain/signals.js";
export type { TaskStore } from "./store/task-store.js";
