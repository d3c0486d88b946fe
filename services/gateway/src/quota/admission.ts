/**
 * The types the limits (`limits.ts`) share with the REST surface
 * (`http/context.ts`), in a module of their own so that neither imports the
 * other for them.
 */
import type { HarnErrorResponse } from "../domain/errors.js";

/** What a guarded operation is. */
export type GuardedOperation =
  | { kind: "read" }
  | { kind: "write" }
  | { kind: "task"; sessionId: string | undefined; agentId: string | undefined };

/**
 * The answer to admitting one operation: when admitted, `settle(started)`
 * must follow the work; otherwise the refusal is the response.
 */
export type Admission =
  | { ok: true; settle(started: boolean): Promise<void> }
  | { ok: false; refusal: HarnErrorResponse };

/** One quota as the `GET /v1/quotas` resource reports it. */
export interface QuotaReport {
  id: string;
  scope: "workspace" | "persona";
  /** What is counted: `tasks_per_day`, `writes` or `reads` (per window). */
  counts: "tasks_per_day" | "writes" | "reads";
  /** Set for the caller's own rates: the actor they count. */
  actorId?: string;
  limit: number;
  periodMs: number;
  used: number;
  resetAt: Date;
  hard: boolean;
}
