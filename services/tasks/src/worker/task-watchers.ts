/**
 * In-process change notifications for tasks: the store reports every task a
 * committed write changed (with its new state when the write had it), and
 * WatchTask waits on them instead of polling. Changes made by other replicas
 * reach a watch through the event log instead (see the TaskService handler).
 */
import type { Task } from "@trellis/contracts/tasks";

/** A subscription to one task's changes. */
export interface TaskChanges {
  /**
   * Resolves at the next change (or one that happened since the last call),
   * after `timeoutMs`, or on abort; with the committed task when it is known
   * (undefined: read it back).
   */
  next(timeoutMs: number, signal?: AbortSignal): Promise<Task | undefined>;
  /** Marks a change without a snapshot (e.g. an event seen on the log). */
  poke(): void;
  close(): void;
}

type Wake = (snapshot: (() => Task | undefined) | undefined) => void;

/** Who waits for which task. */
export class TaskWatchers {
  readonly #byTask = new Map<string, Set<Wake>>();

  /** Whether anyone watches this task (saves building snapshots nobody reads). */
  watched(taskId: string): boolean {
    return this.#byTask.has(taskId);
  }

  /** Wake everyone watching `taskId`. */
  notify(taskId: string, snapshot?: () => Task | undefined): void {
    const set = this.#byTask.get(taskId);
    if (set) for (const wake of set) wake(snapshot);
  }

  /** Start watching one task. */
  watch(taskId: string): TaskChanges {
    let pending = false;
    let latest: (() => Task | undefined) | undefined;
    let wake: (() => void) | undefined;
    const onChange: Wake = (snapshot) => {
      pending = true;
      latest = snapshot;
      wake?.();
    };
    let set = this.#byTask.get(taskId);
    if (!set) {
      set = new Set();
      this.#byTask.set(taskId, set);
    }
    set.add(onChange);
    const take = () => {
      pending = false;
      const snapshot = latest;
      latest = undefined;
      return snapshot?.();
    };
    return {
      poke: () => onChange(undefined),
      next: (timeoutMs, signal) =>
        new Promise<Task | undefined>((resolve) => {
          if (pending || signal?.aborted) return resolve(take());
          const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener("abort", done);
            wake = undefined;
            resolve(take());
          };
          const timer = setTimeout(done, timeoutMs);
          signal?.addEventListener("abort", done, { once: true });
          wake = done;
        }),
      close: () => {
        set.delete(onChange);
        if (set.size === 0 && this.#byTask.get(taskId) === set) this.#byTask.delete(taskId);
      },
    };
  }
}
