/**
 * Leases and lost workers: renewing a runner's leases, releasing a run, and
 * recovering runs whose lease expired (closed if canceled, re-queued when
 * the agent is safe to retry, else failed).
 */
import { create } from "@bufbuild/protobuf";
import { ErrorDetailSchema, TaskStatus } from "@trellis/contracts/core";
import { sql } from "kysely";
import { taskNoteEvent, taskStatusEvent } from "../domain/events.js";
import { cancelEndReason, cancelRequested, transition } from "../domain/lifecycle.js";
import { recoveryAction } from "../domain/mailbox.js";
import type { TaskRow } from "./schema.js";
import { NOW, type StoreContext } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type { Claim } from "./task-store.js";
import type { LockedSession, Tx } from "./write-unit.js";

declare module "./store-parts.js" {
  interface StoreParts {
    /** Leases: renewal, release, lost workers. */
    recovery: Recovery;
  }
}

/** Leases and recovery of lost runs (see the module header). */
export class Recovery {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;

  constructor(ctx: StoreContext, parts: StoreParts) {
    this.#ctx = ctx;
    this.#p = parts;
  }

  async renewLeases(owner: string, taskIds: readonly string[], leaseMs: number): Promise<string[]> {
    if (taskIds.length === 0) return [];
    const rows = await this.#ctx.db
      .updateTable("tasks")
      .set({ lease_expires_at: sql<Date>`now() + make_interval(secs => ${leaseMs / 1000})` })
      .where("id", "in", [...taskIds])
      .where("lease_owner", "=", owner)
      .where("run_state", "=", "running")
      .returning(["id", "status", "canceled_at"])
      .execute();
    const held = new Map(rows.map((r) => [r.id, r]));
    return taskIds.filter((id) => {
      const row = held.get(id);
      return row === undefined || row.status === TaskStatus.CANCELED || row.canceled_at !== null;
    });
  }

  async releaseRun(claim: Claim, owner: string, reason: string): Promise<void> {
    await this.#p.unit.write(async (tx) => {
      const session = await this.#p.unit.lockSession(
        tx,
        claim.task.sessionId,
        claim.task.workspaceId,
      );
      const row = await tx.db
        .selectFrom("tasks")
        .selectAll()
        .where("id", "=", claim.task.id)
        .executeTakeFirst();
      if (row?.run_state !== "running" || row.lease_owner !== owner) return;
      await this.#recover(tx, session, row, reason);
      await this.#p.unit.saveSession(tx, session);
    });
  }

  /** A run whose worker is gone: closed if canceled, re-queued when safe to retry, else failed. */
  async #recover(tx: Tx, session: LockedSession, row: TaskRow, reason: string): Promise<void> {
    const agent = await this.#p.directory.loadAgent(tx, row.agent_id, row.workspace_id);
    const safe = agent !== undefined && this.#p.directory.safeToRetry(agent);
    const action = recoveryAction(
      { canceled: row.status === TaskStatus.CANCELED || cancelRequested(row) },
      safe,
    );
    const scope = this.#p.unit.scopeOf(session);
    switch (action) {
      case "finalize_canceled":
        await this.#p.runs.finalize(tx, session, row, {
          status: TaskStatus.CANCELED,
          extra: [],
          note: "the turn was canceled",
          ...this.#p.runs.canceledEvent(
            session,
            row,
            cancelEndReason(row.cancel_reason, false, reason),
          ),
        });
        return;
      case "requeue":
        this.#p.unit.emit(
          tx,
          taskNoteEvent(
            scope,
            row.id,
            row.status as TaskStatus,
            `re-queued: ${reason}; agent ${row.agent_id} is safe to retry`,
          ),
        );
        await tx.db
          .updateTable("tasks")
          .set({
            run_state: "queued",
            lease_owner: null,
            lease_expires_at: null,
            updated_at: NOW,
          })
          .where("id", "=", row.id)
          .execute();
        tx.changed.set(row.id, undefined);
        return;
      case "fail": {
        const from = row.status as TaskStatus;
        transition(from, TaskStatus.FAILED, row.id);
        const message = `${reason}; agent ${row.agent_id} is not safe to retry, so the turn was not run again`;
        await this.#p.runs.finalize(tx, session, row, {
          status: TaskStatus.FAILED,
          extra: [],
          note: "the worker running the turn was lost",
          failure: { category: "worker_lost", message, retryable: true },
          event: taskStatusEvent(
            scope,
            row.id,
            TaskStatus.FAILED,
            from,
            message,
            create(ErrorDetailSchema, { reason: "worker_lost", domain: "tasks.trellis.dev" }),
          ),
        });
        return;
      }
    }
  }

  /**
   * `accept` (distributed owner mode): recover only the tasks of sessions it
   * accepts (those whose lease this replica holds).
   */
  async recoverExpired(
    owner: string,
    limit: number,
    accept?: (session: { workspace_id: string; id: string }) => Promise<boolean>,
  ): Promise<Claim[]> {
    const expired = await this.#ctx.db
      .selectFrom("tasks")
      .select(["id", "session_id", "workspace_id"])
      .where("run_state", "=", "running")
      .where("lease_expires_at", "<", NOW)
      .limit(limit)
      .execute();
    const claims: Claim[] = [];
    for (const candidate of expired) {
      const session = { workspace_id: candidate.workspace_id, id: candidate.session_id };
      if (accept && !(await accept(session))) continue;
      const claim = await this.#p.unit.write(async (tx) => {
        const session = await this.#p.unit.lockSession(
          tx,
          candidate.session_id,
          candidate.workspace_id,
        );
        const row = await tx.db
          .selectFrom("tasks")
          .selectAll()
          .where("id", "=", candidate.id)
          .where("run_state", "=", "running")
          .where("lease_expires_at", "<", NOW)
          .executeTakeFirst();
        if (!row) return undefined;
        await this.#recover(
          tx,
          session,
          row,
          `its worker ${row.lease_owner ?? "?"} was lost (lease expired)`,
        );
        const next = await this.#p.mailbox.claimHead(tx, session, owner);
        await this.#p.unit.saveSession(tx, session);
        return next;
      });
      if (claim) claims.push(claim);
    }
    return claims;
  }
}
