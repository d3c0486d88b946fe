/** BranchService: branches of sessions, each made by forking the session. */
import type { ServiceImpl } from "@connectrpc/connect";
import { type BranchService, CreateBranchRequestSchema } from "@trellis/contracts/tasks";
import { isTrellisError } from "@trellis/runtime";
import { checkBranchKind, parseBaseRef } from "../domain/branches.js";
import { invalidRequest } from "../domain/errors.js";
import { newId } from "../domain/ids.js";
import type { BranchStore } from "../store/branch-store.js";
import { type HandlerDeps, idempotencyOf, pageOf, scopeOf, writeContext } from "./common.js";

/** ForkSession fields a bad base_ref shows up in. */
const forkPointParams = new Set(["at_event_id", "at_message_id"]);

export function createBranchHandlers(
  deps: HandlerDeps,
  branches: BranchStore,
): ServiceImpl<typeof BranchService> {
  const { store } = deps;
  return {
    async createBranch(request, context) {
      const kind = checkBranchKind(request.kind);
      const point = parseBaseRef(request.baseRef);
      const write = writeContext(context);
      const parent = await store.getSession(request.sessionId, write.scope);
      if (request.parentBranchId) {
        const parentBranch = await branches.get(request.parentBranchId, write.scope);
        if (parentBranch.sessionId !== parent.id) {
          throw invalidRequest(
            `branch ${parentBranch.id} is not the branch of session ${parent.id}`,
            "parent_branch_id",
          );
        }
      }
      if (request.taskId) {
        const task = await store.getTask(request.taskId, write.scope);
        if (task.sessionId !== parent.id) {
          throw invalidRequest(`task ${task.id} is not in session ${parent.id}`, "task_id");
        }
      }
      const idempotency = idempotencyOf(CreateBranchRequestSchema, request, request.idempotencyKey);
      // The fork carries the branch id; a retry with the same key gets the
      // first fork back, and with it the id its branch was recorded under.
      const session = await store
        .forkSession(
          {
            sessionId: parent.id,
            atEventId: point.at === "event" ? point.eventId : "",
            atOrigin: point.at === "origin",
            atMessageCount: 0n,
            ...(point.at === "message" ? { atMessageId: point.messageId } : {}),
            branchId: newId("br"),
            ...(request.metadata ? { metadata: request.metadata } : {}),
            ...(idempotency
              ? {
                  idempotency: {
                    key: `branch:${idempotency.key}`,
                    requestHash: idempotency.requestHash,
                  },
                }
              : {}),
          },
          write,
        )
        .catch((error: unknown) => {
          // The fork names its own fields; the caller gave base_ref.
          if (isTrellisError(error) && error.param && forkPointParams.has(error.param)) {
            throw invalidRequest(error.message, "base_ref");
          }
          throw error;
        });
      const branch = await branches.record(
        {
          id: session.branchId,
          workspaceId: session.workspaceId,
          kind,
          baseRef: request.baseRef,
          // A branch of a branch's session descends from that branch.
          parentBranchId: request.parentBranchId || (parent.parentSessionId ? parent.branchId : ""),
          parentSessionId: parent.id,
          sessionId: session.id,
          taskId: request.taskId,
          forkedFromEventId: session.forkedFromEventId,
          forkedFromMessageId: session.forkedFromMessageId,
          forkedMessageCount: session.forkedMessageCount,
          ...(request.metadata ? { metadata: request.metadata } : {}),
        },
        write,
      );
      return { branch };
    },
    async getBranch(request, context) {
      return { branch: await branches.get(request.branchId, scopeOf(context)) };
    },
    async listBranches(request, context) {
      const session = await store.getSession(request.sessionId, scopeOf(context));
      const page = await branches.listOfSession(session.workspaceId, session.id, pageOf(request));
      return { branches: page.items, nextPageToken: page.nextPageToken };
    },
  };
}
