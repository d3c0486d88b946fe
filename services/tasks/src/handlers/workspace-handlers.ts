/** WorkspaceService: thin proto ↔ store mapping. */
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  CreateWorkspaceRequestSchema,
  WorkspaceSchema,
  type WorkspaceService,
} from "@trellis/contracts/tasks";
import { invalidRequest } from "../domain/errors.js";
import { type HandlerDeps, idempotencyOf, pageOf, scopeOf, writeContext } from "./common.js";

export function createWorkspaceHandlers({
  store,
}: HandlerDeps): ServiceImpl<typeof WorkspaceService> {
  return {
    async createWorkspace(request, context) {
      const workspace = await store.createWorkspace(
        create(WorkspaceSchema, {
          id: request.workspaceId,
          name: request.name,
          root: request.root,
          ...(request.metadata ? { metadata: request.metadata } : {}),
        }),
        idempotencyOf(CreateWorkspaceRequestSchema, request, request.idempotencyKey),
        writeContext(context),
      );
      return { workspace };
    },
    async getWorkspace(request, context) {
      return { workspace: await store.getWorkspace(request.workspaceId, scopeOf(context)) };
    },
    async updateWorkspace(request, context) {
      if (!request.workspaceId) throw invalidRequest("workspace_id is required", "workspace_id");
      const workspace = await store.updateWorkspace(
        request.workspaceId,
        {
          ...(request.name !== undefined ? { name: request.name } : {}),
          ...(request.metadata ? { metadata: request.metadata } : {}),
        },
        writeContext(context),
      );
      return { workspace };
    },
    async archiveWorkspace(request, context) {
      if (!request.workspaceId) throw invalidRequest("workspace_id is required", "workspace_id");
      return {
        workspace: await store.archiveWorkspace(request.workspaceId, writeContext(context)),
      };
    },
    async listWorkspaces(request, context) {
      const page = await store.listWorkspaces(pageOf(request), scopeOf(context));
      return { workspaces: page.items, nextPageToken: page.nextPageToken };
    },
  };
}
