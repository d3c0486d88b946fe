import type { TasksTarget } from "./harness.js";

/** `target` with the turn journal on (TRELLIS_TASKS_JOURNAL) in every start. */
export function journaled<T extends TasksTarget>(makeTarget: () => T): () => T {
  return () => {
    const target = makeTarget();
    const start: TasksTarget["start"] = (options = {}) =>
      target.start({ ...options, env: { TRELLIS_TASKS_JOURNAL: "true", ...options.env } });
    return Object.assign(Object.create(Object.getPrototypeOf(target)), target, {
      name: `${target.name}, journal on`,
      start,
    }) as T;
  };
}
