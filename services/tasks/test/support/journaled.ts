import type { TasksTarget } from "./harness.js";

/**
 * `target` with the turn journal on (TRELLIS_TASKS_JOURNAL) in every start:
 * `"true"` (step records beside the rows) or `"owner"` (the embedded session owner).
 */
export function journaled<T extends TasksTarget>(
  makeTarget: () => T,
  mode: "true" | "owner" = "true",
): () => T {
  return () => {
    const target = makeTarget();
    const start: TasksTarget["start"] = (options = {}) =>
      target.start({ ...options, env: { TRELLIS_TASKS_JOURNAL: mode, ...options.env } });
    return Object.assign(Object.create(Object.getPrototypeOf(target)), target, {
      name: `${target.name}, journal ${mode === "owner" ? "owner" : "on"}`,
      start,
    }) as T;
  };
}
