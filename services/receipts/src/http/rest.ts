/**
 * The Harn REST surface of receipts (`harn/openapi.yaml`, tag Receipts), as
 * the service's plain-HTTP handler; the gateway mounts it (or calls the gRPC
 * service, which answers the same).
 *
 * | route | answer |
 * |---|---|
 * | `GET /v1/receipts/{id}` | `Receipt` resource; its `wire.payload` is the receipt document. With `Accept: application/vnd.harn.receipt+json`, the document itself (its stored canonical bytes) |
 * | `POST /v1/receipts/{id}/verify` | `ReceiptVerification` `{valid, checked_at, reason, details, problems[]}` |
 * | `GET /v1/tasks/{id}/receipts` | `ReceiptList` (`limit` 1…200, `cursor`) |
 * | `POST /v1/receipts/verify` | Trellis extension: verify a receipt document sent as the body |
 * | `GET /v1/receipts/public-keys` | Trellis extension: the signing keys (PEM and JWK) |
 *
 * Workspace scoping as in the gRPC handlers, from the caller headers the
 * gateway sets (`x-trellis-actor`, `x-trellis-workspace`).
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { callerFromHeaders, confinedWorkspaceOf } from "@trellis/platform";
import {
  type HttpHandler,
  type HttpRequest,
  type HttpResponse,
  httpRequestId,
  type Logger,
} from "@trellis/runtime";
import { isJsonObject, SIGNATURE_ALGORITHM } from "../domain/receipt.js";
import { publicKeyJwkX, publicKeyPem } from "../domain/signing.js";
import type { Verification } from "../domain/verify.js";
import { pageSize } from "../handlers/receipt-service.js";
import type { KeyRing } from "../keys.js";
import type { ReceiptStore } from "../store/receipt-store.js";
import type { ReceiptRow } from "../store/schema.js";
import type { ReceiptVerifier } from "../verifier.js";

/** Media type of a bare receipt document (receipts README). */
export const RECEIPT_MEDIA_TYPE = "application/vnd.harn.receipt+json";

const MAX_BODY = 1 << 20;

interface HarnError {
  status: number;
  code: string;
  type: string;
  message: string;
  param?: string;
}

function send(res: HttpResponse, status: number, body: unknown, type = "application/json"): void {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  res.writeHead(status, {
    "content-type": `${type}; charset=utf-8`,
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

function sendError(req: HttpRequest, res: HttpResponse, error: HarnError): void {
  send(res, error.status, {
    error: {
      code: error.code,
      message: error.message,
      type: error.type,
      param: error.param ?? null,
      request_id: httpRequestId(req) || null,
      details: {},
    },
  });
}

function notFound(what: string, id: string): HarnError {
  return {
    status: 404,
    code: "resource_not_found",
    type: "not_found_error",
    message: `${what} ${JSON.stringify(id)} was not found`,
  };
}

function badRequest(message: string, param?: string): HarnError {
  return {
    status: 400,
    code: "invalid_request",
    type: "request_error",
    message,
    ...(param ? { param } : {}),
  };
}

function header(req: HttpRequest, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The workspace the gateway's headers confine the caller to; undefined for an
 * internal call or an admin credential (both see every workspace).
 */
function callerWorkspace(req: HttpRequest): string | undefined {
  return confinedWorkspaceOf(callerFromHeaders((name) => header(req, name)));
}

function visible(req: HttpRequest, workspaceId: string): boolean {
  const workspace = callerWorkspace(req);
  return workspace === undefined || workspace === workspaceId;
}

async function readBody(req: HttpRequest): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer | string>) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    size += buffer.length;
    if (size > MAX_BODY) throw badRequest("the body is larger than 1 MiB");
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** A stored receipt as the Harn `Receipt` resource. */
export function receiptResource(row: ReceiptRow): JsonObject {
  const document = JSON.parse(row.document) as JsonObject;
  const subject = { object: row.subject_object, id: row.subject_id };
  const signatures = Array.isArray(document.signatures) ? document.signatures : [];
  const signature = signatures[0];
  const issuer = isJsonObject(document.issuer) ? document.issuer : {};
  const issuedAt = row.issued_at.toISOString();
  return {
    id: row.id,
    object: "receipt",
    created_at: issuedAt,
    updated_at: issuedAt,
    metadata: {
      workspace_id: row.workspace_id,
      task_id: row.task_id,
      session_id: row.session_id,
      chain_index: Number(row.chain_index),
      receipt_hash: row.receipt_hash,
      previous_receipt_hash: row.previous_receipt_hash,
      key_id: row.key_id,
    },
    subject,
    format: String(document.schema ?? ""),
    summary: `${row.subject_object} ${row.subject_id} ${row.final_state}`,
    issued_at: issuedAt,
    issuer: typeof issuer.id === "string" ? issuer.id : "",
    wire: {
      schema_version: String(document.schema ?? ""),
      subject,
      issued_at: String(document.issued_at ?? issuedAt),
      payload: document,
      signature: isJsonObject(signature)
        ? {
            algorithm: String(signature.algorithm ?? ""),
            key_id: String(signature.key_id ?? ""),
            value: String(signature.signature ?? ""),
          }
        : null,
    },
    verification: null,
  };
}

/** A verification as the Harn `ReceiptVerification` (plus `problems`). */
export function verificationJson(result: Verification, checkedAt = new Date()): JsonObject {
  const problems = result.problems.map((p) => ({
    code: p.code,
    message: p.message,
    field: p.field ?? null,
  }));
  return {
    valid: result.valid,
    checked_at: checkedAt.toISOString(),
    reason: result.problems[0]?.code ?? null,
    details: {
      checks: result.checks,
      receipt_id: result.receiptId ?? null,
      key_id: result.keyId ?? null,
      problems,
    },
    problems,
  };
}

/** Dependencies of the REST handler. */
export interface ReceiptsHttpDeps {
  store: ReceiptStore;
  verifier: ReceiptVerifier;
  keys: KeyRing;
  logger: Logger;
}

const RECEIPT = /^\/v1\/receipts\/([^/]+)$/;
const VERIFY = /^\/v1\/receipts\/([^/]+)\/verify$/;
const TASK_RECEIPTS = /^\/v1\/tasks\/([^/]+)\/receipts$/;

/** The receipts REST handler (returns false for paths it does not serve). */
export function createReceiptsHttpHandler(deps: ReceiptsHttpDeps): HttpHandler {
  const { store, verifier, keys } = deps;

  async function trustAnchor(req: HttpRequest): Promise<string | undefined> {
    const body = (await readBody(req)).trim();
    if (!body) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw badRequest("the body is not JSON");
    }
    if (!isJsonObject(parsed)) throw badRequest("the body must be a JSON object");
    const anchor = parsed.trust_anchor;
    if (anchor !== undefined && anchor !== null && typeof anchor !== "string") {
      throw badRequest("trust_anchor must be a key id", "trust_anchor");
    }
    return anchor || undefined;
  }

  async function route(req: HttpRequest, res: HttpResponse, path: string, query: URLSearchParams) {
    const method = req.method ?? "GET";
    if (path === "/v1/receipts/public-keys" && method === "GET") {
      await keys.ensure();
      const data = keys.list().map((key) => ({
        key_id: key.keyId,
        algorithm: SIGNATURE_ALGORITHM,
        public_key_pem: publicKeyPem(key.publicKey),
        jwk: { kty: "OKP", crv: "Ed25519", x: publicKeyJwkX(key.publicKey), kid: key.keyId },
        current: key.keyId === keys.current.keyId,
        created_at: key.createdAt.toISOString(),
      }));
      send(res, 200, {
        object: "list",
        data,
        page: { has_more: false, next_cursor: null },
        current_key_id: keys.current.keyId,
      });
      return true;
    }
    if (path === "/v1/receipts/verify" && method === "POST") {
      const body = await readBody(req);
      let text = body;
      try {
        // A Receipt resource or `{receipt: …}` is accepted besides the bare document.
        const parsed: unknown = JSON.parse(body);
        if (isJsonObject(parsed)) {
          const inner = isJsonObject(parsed.wire) ? parsed.wire.payload : parsed.receipt;
          if (isJsonObject(inner)) text = JSON.stringify(inner);
        }
      } catch {
        // Reported by the verifier as document_unparseable.
      }
      const anchor = query.get("trust_anchor") || undefined;
      const result = await verifier.verifyDocument(text, anchor, (workspaceId) =>
        visible(req, workspaceId),
      );
      send(res, 200, verificationJson(result));
      return true;
    }
    let match = VERIFY.exec(path);
    if (match) {
      if (method !== "POST") return false;
      const id = decodeURIComponent(match[1] as string);
      const row = await store.getReceipt(id);
      if (!row || !visible(req, row.workspace_id)) throw notFound("receipt", id);
      const anchor = await trustAnchor(req);
      send(res, 200, verificationJson(await verifier.verifyStored(row, anchor)));
      return true;
    }
    match = RECEIPT.exec(path);
    if (match) {
      if (method !== "GET") return false;
      const id = decodeURIComponent(match[1] as string);
      const row = await store.getReceipt(id);
      if (!row || !visible(req, row.workspace_id)) throw notFound("receipt", id);
      if ((header(req, "accept") ?? "").includes(RECEIPT_MEDIA_TYPE)) {
        send(res, 200, row.document, RECEIPT_MEDIA_TYPE);
      } else {
        send(res, 200, receiptResource(row));
      }
      return true;
    }
    match = TASK_RECEIPTS.exec(path);
    if (match) {
      if (method !== "GET") return false;
      const taskId = decodeURIComponent(match[1] as string);
      const limitText = query.get("limit");
      const limit = limitText === null ? 50 : Number(limitText);
      if (!Number.isInteger(limit) || limit < 1 || limit > 200) {
        throw badRequest("limit must be an integer between 1 and 200", "limit");
      }
      const cursor = query.get("cursor") ?? "";
      if (cursor && !/^\d{1,19}$/.test(cursor)) throw badRequest("cursor is not valid", "cursor");
      const page = await store.listTaskReceipts(
        taskId,
        pageSize(limit),
        cursor ? BigInt(cursor) : undefined,
      );
      const data = page.receipts.filter((r) => visible(req, r.workspace_id)).map(receiptResource);
      send(res, 200, {
        object: "list",
        data,
        page: {
          has_more: page.nextAfter !== undefined,
          next_cursor: page.nextAfter === undefined ? null : page.nextAfter.toString(),
        },
      });
      return true;
    }
    return false;
  }

  return async (req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const path = url.pathname;
    if (!path.startsWith("/v1/receipts") && !TASK_RECEIPTS.test(path)) return false;
    try {
      return await route(req, res, path, url.searchParams);
    } catch (error) {
      if (isHarnError(error)) {
        sendError(req, res, error);
      } else {
        deps.logger.error("receipts REST request failed", {
          path,
          request_id: httpRequestId(req),
          error: error instanceof Error ? error.message : String(error),
        });
        sendError(req, res, {
          status: 500,
          code: "internal_error",
          type: "server_error",
          message: `internal error (request ${httpRequestId(req) || "unknown"})`,
        });
      }
      return true;
    }
  };
}

function isHarnError(value: unknown): value is HarnError {
  return isJsonObject(value) && typeof value.status === "number" && typeof value.code === "string";
}
