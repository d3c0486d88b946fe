import { abortReason } from "../../async.js";
import type { AcquireLockOptions, Lease } from "../../database.js";

interface LockState {
  /** Waiters in arrival order; each is handed the lock directly. */
  queue: { grant(): void }[];
}

// Locks are shared by every Database opened on the same PGlite instance (the
// instance is the "server"), hence keyed by it and not by Database.
const registries = new WeakMap<object, Map<string, LockState>>();

/** The lock half of a PGlite {@link Database}. */
export interface PGliteLocks {
  acquire(name: string, options?: AcquireLockOptions): Promise<Lease>;
  /** Releases every lease this Database holds and marks them lost. */
  close(): Promise<void>;
}

/**
 * Named locks for PGlite, held in this process. Postgres advisory locks
 * cannot serve here: a PGlite instance is a single session, and advisory
 * locks are re-entrant within a session, so two holders would both "get" it.
 * A PGlite instance never spans processes, so an in-process lock excludes
 * every other holder there can be. Fair (first come, first served).
 */
export function createPGliteLocks(instance: object): PGliteLocks {
  let locks = registries.get(instance);
  if (locks === undefined) {
    locks = new Map();
    registries.set(instance, locks);
  }
  const registry = locks;
  const held = new Set<{ lost: AbortController; release(): Promise<void> }>();
  let closed = false;

  function grantLease(name: string, state: LockState): Lease {
    const lost = new AbortController();
    let released = false;
    const lease = {
      lost,
      async release() {
        if (released) return;
        released = true;
        held.delete(lease);
        const next = state.queue.shift();
        if (next) next.grant();
        else registry.delete(name);
      },
    };
    held.add(lease);
    return { lost: lost.signal, release: lease.release };
  }

  return {
    async acquire(name, options = {}) {
      const { signal } = options;
      signal?.throwIfAborted();
      if (closed) throw new Error("database is closed");
      const state = registry.get(name);
      if (state === undefined) {
        const fresh: LockState = { queue: [] };
        registry.set(name, fresh);
        return grantLease(name, fresh);
      }
      await new Promise<void>((resolve, reject) => {
        const waiter = {
          grant() {
            signal?.removeEventListener("abort", onAbort);
            resolve();
          },
        };
        const onAbort = () => {
          const at = state.queue.indexOf(waiter);
          if (at >= 0) state.queue.splice(at, 1);
          reject(abortReason(signal as AbortSignal));
        };
        state.queue.push(waiter);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
      return grantLease(name, state);
    },
    async close() {
      closed = true;
      for (const lease of [...held]) {
        lease.lost.abort(new Error("database closed"));
        await lease.release();
      }
    },
  };
}
