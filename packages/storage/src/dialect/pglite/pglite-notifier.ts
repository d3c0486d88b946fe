import type { PGlite } from "@electric-sql/pglite";
import type { Unlisten } from "../../database.js";

/** The notification half of a PGlite {@link Database}. */
export interface PGliteNotifier {
  listen(channel: string, onNotify: (payload: string) => void): Promise<Unlisten>;
  close(): Promise<void>;
}

/**
 * `LISTEN` / `NOTIFY` through PGlite's own `listen()`: a `NOTIFY` committed by
 * any Database on the same instance reaches these listeners after the commit.
 * There is no connection to lose, so no catch-up call is ever needed.
 */
export function createPGliteNotifier(pglite: PGlite): PGliteNotifier {
  const active = new Set<Unlisten>();
  return {
    async listen(channel, onNotify) {
      const unsubscribe = await pglite.listen(channel, (payload) => onNotify(payload ?? ""));
      let done = false;
      const unlisten: Unlisten = async () => {
        if (done) return;
        done = true;
        active.delete(unlisten);
        if (!pglite.closed) await unsubscribe();
      };
      active.add(unlisten);
      return unlisten;
    },
    async close() {
      await Promise.all([...active].map((unlisten) => unlisten()));
    },
  };
}
