/**
 * What every handler shares: who is calling (workspace scope, actor),
 * idempotency hashing, paging, and the error boundary for in-process calls.
 */
import { createHash } from "node:crypto";
import { clone, create, type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { EventLog, SignalBus } from "@trellis/eventlog";
import type { AgentExecutor } from "@trellis/execution";
import { callerOf, confinedWorkspaceOf } from "@trellis/platform";
import type { Logger, SecretFingerprints } from "@trellis/runtime";
import { SYSTEM_ACTOR, userActor } from "../domain/events.js";
import type { Idempotency, PageRequest, TaskStore, WriteContext } from "../store/task-store.js";
import type { TaskWatchers } from "../worker/task-watchers.js";
import type { TurnRunner } from "../worker/turn-runner.js";

/** What the handlers are built from (once, in definition.ts). */
export interface HandlerDeps {
  store: TaskStore;
  executor: AgentExecutor;
  runner: TurnRunner;
  watchers: TaskWatchers;
  eventLog: EventLog;
  signals: SignalBus;
  logger: Logger;
  /** This replica's id: the lease owner of the turns it claims. */
  owner: string;
  /** How long a canceled backend gets to stop (CancelTask waits for it, and a margin). */
  cancelGraceMs: number;
  /**
   * Also wake WatchTask streams from the event log (distributed mode, where
   * another replica may run the task); in-process notifications cover the rest.
   */
  watchThroughLog: boolean;
  /** The deployment's secret fingerprints (replay: `secret:` overrides). */
  fingerprints: SecretFingerprints;
}

/**
 * The workspace the caller is confined to, or undefined when it may act in
 * every workspace: an internal (trusted) call, or an admin credential (`*`).
 */
export function scopeOf(context: HandlerContext): string | undefined {
  return confinedWorkspaceOf(callerOf(context));
}

/**
 * The workspace a request acts in: the one it names, else the caller's own
 * (an admin credential's requests land in its home workspace when they name
 * none). Empty for an internal call that names none: the store's default.
 */
export function workspaceOfRequest(context: HandlerContext, requested: string): string {
  return requested || callerOf(context)?.workspaceId || "";
}

/** The actor and scope of a write. */
export function writeContext(context: HandlerContext): WriteContext {
  const caller = callerOf(context);
  if (!caller) return { actor: SYSTEM_ACTOR };
  const scope = confinedWorkspaceOf(caller);
  return scope === undefined
    ? { actor: userActor(caller.actorId) }
    : { actor: userActor(caller.actorId), scope };
}

/**
 * The idempotency record of a request: its key, and a hash of the request
 * without the key (same key + different body → `idempotency_key_reused`).
 * `ignored` fields say how to answer, not what to do: they are left out of
 * the hash too.
 */
export function idempotencyOf<Desc extends DescMessage>(
  schema: Desc,
  request: MessageShape<Desc>,
  key: string,
  ignored: readonly (keyof MessageShape<Desc> & string)[] = [],
): Idempotency | undefined {
  if (!key) return undefined;
  const copy = clone(schema, request);
  (copy as MessageShape<Desc> & { idempotencyKey: string }).idempotencyKey = "";
  if (ignored.length > 0) {
    const zero = create(schema);
    for (const field of ignored) copy[field] = zero[field];
  }
  return { key, requestHash: createHash("sha256").update(toBinary(schema, copy)).digest("hex") };
}

/** Paging fields of a list request. */
export function pageOf(request: { pageSize: number; pageToken: string }): PageRequest {
  return { pageSize: request.pageSize, pageToken: request.pageToken };
}

export { withErrorDetails } from "@trellis/runtime";
