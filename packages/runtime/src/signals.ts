/** Process signal handling for `main.ts`. */
import type { Logger } from "./logger.js";

/** Options of {@link onShutdownSignals}. */
export interface ShutdownSignalsOptions {
  /** Signals to handle (default SIGINT and SIGTERM). */
  signals?: readonly NodeJS.Signals[];
  /** Exit the process when `shutdown` settles (default true): 0 on success, 1 on failure. */
  exit?: boolean;
  /** Where to report a failed shutdown or a forced exit. */
  logger?: Logger;
}

/**
 * Run `shutdown` once on the first SIGINT/SIGTERM; a second signal exits at
 * once (exit code 1) for an operator who does not want to wait for draining.
 * Returns a function that removes the handlers.
 *
 * @example
 *   onShutdownSignals(async () => {
 *     await service.close({ graceMs: config.SHUTDOWN_GRACE });
 *     await telemetry.shutdown();
 *   }, { logger: service.logger });
 */
export function onShutdownSignals(
  shutdown: (signal: NodeJS.Signals) => unknown,
  options: ShutdownSignalsOptions = {},
): () => void {
  const signals = options.signals ?? ["SIGINT", "SIGTERM"];
  const exit = options.exit ?? true;
  const logger = options.logger;
  let started = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (started) {
      logger?.warn("second signal: exiting without waiting for shutdown", { signal });
      if (exit) process.exit(1);
      return;
    }
    started = true;
    logger?.info("shutting down", { signal });
    Promise.resolve()
      .then(() => shutdown(signal))
      .then(
        () => {
          if (exit) process.exit(process.exitCode ?? 0);
        },
        (error: unknown) => {
          logger?.error("shutdown failed", { signal, error });
          if (exit) process.exit(1);
        },
      );
  };
  for (const signal of signals) process.on(signal, onSignal);
  return () => {
    for (const signal of signals) process.off(signal, onSignal);
  };
}
