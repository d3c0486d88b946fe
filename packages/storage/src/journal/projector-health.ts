import type { HealthDependency } from "@trellis/runtime";
import { journalUnavailable } from "./journal-errors.js";
import type { Projector } from "./projector.js";

/** Options of {@link projectorHealth}. */
export interface ProjectorHealthOptions {
  /** Unhealthy above this many unapplied entries (default 10,000). */
  maxLag?: bigint;
  /** Unhealthy after this many failed rounds in a row (default 3). */
  maxFailures?: number;
}

/**
 * A health dependency for a service's health service (`trellis health`,
 * gRPC health): NOT_SERVING while the projector is stopped, keeps failing,
 * or lags too far behind, with the projector's status in the message.
 *
 * @example
 *   createHealth({ dependencies: [databaseHealth, projectorHealth(readModel)] });
 */
export function projectorHealth(
  projector: Projector,
  options: ProjectorHealthOptions = {},
): HealthDependency {
  const maxLag = options.maxLag ?? 10_000n;
  const maxFailures = options.maxFailures ?? 3;
  return {
    name: `projector ${projector.status().name}`,
    check() {
      const status = projector.status();
      const problem = !status.running
        ? "stopped"
        : status.failures >= maxFailures
          ? `failing (${status.failures} rounds: ${status.lastError ?? "unknown error"})`
          : status.lag > maxLag
            ? `lagging ${status.lag} entries (limit ${maxLag})`
            : undefined;
      if (problem !== undefined) {
        throw journalUnavailable(
          `projector ${status.name} is ${problem} at position ${status.position} of ${status.head}`,
        );
      }
      return status;
    },
  };
}
