/** ArtifactService and OutcomeService: durable results of tasks. */
import type { ServiceImpl } from "@connectrpc/connect";
import {
  type ArtifactService,
  type OutcomeService,
  RegisterArtifactRequestSchema,
} from "@trellis/contracts/tasks";
import { isValidMediaType } from "@trellis/runtime";
import { invalidRequest } from "../domain/errors.js";
import type { ResourceFilter } from "../store/task-store.js";
import {
  type HandlerDeps,
  idempotencyOf,
  pageOf,
  scopeOf,
  workspaceOfRequest,
  writeContext,
} from "./common.js";

/** The results a ListArtifacts / ListOutcomes request asks for: of a workspace, session or task. */
function filterOf(request: ResourceFilter): ResourceFilter {
  return { workspaceId: request.workspaceId, sessionId: request.sessionId, taskId: request.taskId };
}

export function createArtifactHandlers({
  store,
}: HandlerDeps): ServiceImpl<typeof ArtifactService> {
  return {
    async registerArtifact(request, context) {
      if (!request.artifact) throw invalidRequest("artifact is required", "artifact");
      const mimeType = request.artifact.mimeType;
      if (mimeType !== "" && !isValidMediaType(mimeType)) {
        // It becomes a Content-Type header when the content is served.
        throw invalidRequest(
          "artifact.mime_type must be a media type (type/subtype[; name=value]…, at most 255 characters, no control characters)",
          "artifact.mime_type",
        );
      }
      const idempotency = idempotencyOf(
        RegisterArtifactRequestSchema,
        request,
        request.idempotencyKey,
      );
      const artifact = await store.registerArtifact(
        {
          ...request.artifact,
          workspaceId: workspaceOfRequest(context, request.artifact.workspaceId),
        },
        request.content,
        idempotency,
        writeContext(context),
      );
      return { artifact };
    },
    async getArtifact(request, context) {
      return { artifact: await store.getArtifact(request.artifactId, scopeOf(context)) };
    },
    async listArtifacts(request, context) {
      const page = await store.listArtifacts(filterOf(request), pageOf(request), scopeOf(context));
      return { artifacts: page.items, nextPageToken: page.nextPageToken };
    },
    async getArtifactContent(request, context) {
      return store.getArtifactContent(request.artifactId, scopeOf(context));
    },
  };
}

export function createOutcomeHandlers({ store }: HandlerDeps): ServiceImpl<typeof OutcomeService> {
  return {
    async getOutcome(request, context) {
      return { outcome: await store.getOutcome(request.outcomeId, scopeOf(context)) };
    },
    async listOutcomes(request, context) {
      const page = await store.listOutcomes(filterOf(request), pageOf(request), scopeOf(context));
      return { outcomes: page.items, nextPageToken: page.nextPageToken };
    },
  };
}
