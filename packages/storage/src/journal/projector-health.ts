import type { HealthDependency } from "@trellis/runtime";
import { journalUnavailable } from "./journal-errors.js";
import type { Projector } from "./projector.js";

/** Options of {@link projectorHealth}. */
export interface ProjectorHealthOptions {
  /** Unhealthy above this many unapplied entries (default 10,000). */
  maxLag?: bigint;
  /** Unhealthy after this many failed rounds in a row (default 3). */
  maxFailures?: number;
  /**
   * Unhealthy for this long after an entry was dead-lettered, so `trellis
   * health` shows it with its cause (default 0: never — one refused entry is
   * no reason to take a replica out of readiness; the counter
   * `trellis.journal.projector.dead_letters` is what to alert on).
   */
  deadLetterAlertMs?: number;
}

/**
 * A health dependency for a service's health service (`trellis health`,
 * gRPC health): NOT_SERVING while the projector is stopped, keeps failing,
 * lags too far behind, or (if asked) has just dead-lettered an entry, with the
 * projector's status in the message.
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
  const deadLetterAlertMs = options.deadLetterAlertMs ?? 0;
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
            : status.lastDeadLetter && Date.now() - status.lastDeadLetter.at < deadLetterAlertMs
              ? `dead-lettering (${status.deadLetters} since start; last ${status.lastDeadLetter.kind} at position ${status.lastDeadLetter.position}: SQLSTATE ${status.lastDeadLetter.reason} ${status.lastDeadLetter.message})`
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
