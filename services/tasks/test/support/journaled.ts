import type { TasksTarget } from "./harness.js";

/**
 * `target` with the turn journal mode named (TRELLIS_TASKS_JOURNAL) in every
 * start: `"true"` (step records beside the rows), `"owner"` (the session
 * owner, the default) or `"false"` (the relational path).
 */
export function journaled<T extends TasksTarget>(
  makeTarget: () => T,
  mode: "false" | "true" | "owner" = "true",
): () => T {
  return () => {
    const target = makeTarget();
    const start: TasksTarget["start"] = (options = {}) =>
      target.start({ ...options, env: { TRELLIS_TASKS_JOURNAL: mode, ...options.env } });
    return Object.assign(Object.create(Object.getPrototypeOf(target)), target, {
      name: `${target.name}, journal ${{ false: "off", true: "on", owner: "owner" }[mode]}`,
      start,
    }) as T;
  };
}
