/** Artifacts (registered with their content) and outcomes. */
import { type Artifact, ArtifactService, OutcomeService } from "@trellis/contracts/tasks";
import { errors, isValidMediaType } from "@trellis/runtime";
import { sha256Hex } from "../../domain/canonical-json.js";
import { parseArtifactKind, parseVisibility } from "../../domain/harn-input.js";
import { artifactToHarn, listJson, outcomeToHarn } from "../../domain/harn-json.js";
import { JsonReader } from "../../domain/json-input.js";
import type { RestCall } from "../context.js";
import type { RestResponse } from "../io.js";
import {
  created,
  ok,
  param,
  queryString,
  queryWorkspace,
  required,
  visible,
  visibleSession,
  visibleTask,
  workspaceOf,
} from "./common.js";
import { okPage, pageOf } from "./paging.js";

export async function listArtifacts(call: RestCall): Promise<RestResponse> {
  const response = await call.ports.clients.get(ArtifactService).listArtifacts(
    {
      workspaceId: queryWorkspace(call),
      sessionId: queryString(call, "session_id") ?? "",
      taskId: queryString(call, "task_id") ?? "",
      ...pageOf(call),
    },
    call.options(),
  );
  return okPage(response.artifacts, artifactToHarn, response.nextPageToken);
}

export function decodeContent(body: JsonReader): Uint8Array | undefined {
  const text = body.string("content");
  const base64 = body.string("content_base64");
  if (text !== undefined && base64 !== undefined) {
    throw errors.invalid("give content or content_base64, not both", "content_base64");
  }
  if (text !== undefined) return Buffer.from(text, "utf8");
  if (base64 !== undefined) {
    if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(base64.replace(/\s+/g, ""))) {
      throw errors.invalid("content_base64 must be base64", "content_base64");
    }
    return Buffer.from(base64, "base64");
  }
  return undefined;
}

export async function registerArtifact(call: RestCall): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const kind = parseArtifactKind(body);
  const visibility = parseVisibility(body);
  let sha = body.string("sha256");
  if (sha !== undefined) {
    const hex = sha.replace(/^sha256:/, "");
    if (!/^[a-fA-F0-9]{64}$/.test(hex)) {
      throw errors.invalid("sha256 must be 64 hexadecimal characters", "sha256");
    }
    sha = hex.toLowerCase();
  }
  const content = decodeContent(body);
  if (content !== undefined) {
    const actual = sha256Hex(content);
    if (sha !== undefined && sha !== actual) {
      throw errors.invalid("sha256 does not match the content", "sha256");
    }
    sha = actual;
  }
  const metadata = body.object("metadata");
  const mimeType = body.string("mime_type") ?? "application/octet-stream";
  if (!isValidMediaType(mimeType)) {
    throw errors.invalid(
      "mime_type must be a media type (type/subtype[; name=value]…, at most 255 characters, no control characters)",
      "mime_type",
    );
  }
  const { artifact } = await call.ports.clients.get(ArtifactService).registerArtifact(
    {
      artifact: {
        workspaceId: workspaceOf(call, body.string("workspace_id")),
        sessionId: body.string("session_id") ?? "",
        taskId: body.string("task_id") ?? "",
        kind,
        name: body.string("name") ?? "",
        mimeType,
        uri: body.string("uri") ?? "",
        visibility,
        sha256: sha === undefined ? "" : `sha256:${sha}`,
        ...(metadata ? { metadata } : {}),
      },
      ...(content ? { content } : {}),
      idempotencyKey: call.idempotencyKey,
    },
    call.options(),
  );
  return created(artifactToHarn(required(artifact, "artifact", "")));
}

export async function visibleArtifact(call: RestCall, id: string): Promise<Artifact> {
  const { artifact } = await call.ports.clients
    .get(ArtifactService)
    .getArtifact({ artifactId: id }, call.options());
  return visible(call, artifact, "artifact", id);
}

export async function getArtifact(call: RestCall): Promise<RestResponse> {
  return ok(artifactToHarn(await visibleArtifact(call, param(call, "artifact_id"))));
}

export async function getArtifactContent(call: RestCall): Promise<RestResponse> {
  const id = param(call, "artifact_id");
  const artifact = await visibleArtifact(call, id);
  const response = await call.ports.clients
    .get(ArtifactService)
    .getArtifactContent({ artifactId: id }, call.options());
  return {
    status: 200,
    body: response.content,
    headers: artifactContentHeaders(response.mimeType || artifact.mimeType, artifact.name, id),
  };
}

/**
 * Headers of served artifact content. Content is whatever a tool or caller
 * uploaded, served from the API's origin — the origin of `/ui` — so it is
 * never rendered there: always an attachment, under a CSP that sandboxes it
 * (no scripts, no same-origin access, no subresources) and `nosniff`. A
 * stored media type that is not well formed (stored before it was checked)
 * is served as `application/octet-stream`.
 */
export function artifactContentHeaders(
  mimeType: string,
  name: string,
  id: string,
): Record<string, string> {
  const type =
    mimeType !== "" && isValidMediaType(mimeType) ? mimeType : "application/octet-stream";
  const fallback = (name || id).replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 100) || "artifact";
  return {
    "content-type": type,
    "content-disposition": `attachment; filename="${fallback}"; filename*=UTF-8''${encodeRFC5987(name || id)}`,
    "content-security-policy": "default-src 'none'; sandbox",
    "x-content-type-options": "nosniff",
    "cross-origin-resource-policy": "same-origin",
    "cache-control": "private, no-store",
  };
}

function encodeRFC5987(value: string): string {
  let encoded: string;
  try {
    encoded = encodeURIComponent(value.slice(0, 200));
  } catch {
    // A lone surrogate: no UTF-8 form to give.
    encoded = "artifact";
  }
  return encoded.replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export async function resolveArtifacts(
  call: RestCall,
  ids: readonly string[],
): Promise<Artifact[]> {
  const client = call.ports.clients.get(ArtifactService);
  const found = await Promise.all(
    ids.map((artifactId) =>
      client.getArtifact({ artifactId }, call.options()).then(
        (r) => r.artifact,
        () => undefined,
      ),
    ),
  );
  return found.filter((a): a is Artifact => a !== undefined);
}

export async function listOutcomes(call: RestCall): Promise<RestResponse> {
  const taskId = queryString(call, "task_id");
  const sessionId = queryString(call, "session_id");
  if (taskId !== undefined) await visibleTask(call, taskId);
  if (sessionId !== undefined) await visibleSession(call, sessionId);
  const response = await call.ports.clients.get(OutcomeService).listOutcomes(
    {
      workspaceId: taskId === undefined && sessionId === undefined ? queryWorkspace(call) : "",
      sessionId: sessionId ?? "",
      taskId: taskId ?? "",
      ...pageOf(call),
    },
    call.options(),
  );
  const data = await Promise.all(
    response.outcomes.map(async (o) =>
      outcomeToHarn(o, await resolveArtifacts(call, o.artifactIds)),
    ),
  );
  return ok(listJson(data, { nextCursor: response.nextPageToken }));
}

export async function getOutcome(call: RestCall): Promise<RestResponse> {
  const id = param(call, "outcome_id");
  const { outcome } = await call.ports.clients
    .get(OutcomeService)
    .getOutcome({ outcomeId: id }, call.options());
  const found = visible(call, outcome, "outcome", id);
  return ok(outcomeToHarn(found, await resolveArtifacts(call, found.artifactIds)));
}
