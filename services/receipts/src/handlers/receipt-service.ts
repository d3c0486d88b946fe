/**
 * `trellis.receipts.v1.ReceiptService`: thin handlers, proto ↔ domain.
 *
 * Workspace scoping: a call with a caller (set by the gateway) sees only its
 * workspace's receipts; another workspace's receipt is `resource_not_found`,
 * as if it did not exist. Internal calls (no caller) see everything.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type PublicKey,
  PublicKeySchema,
  type Receipt,
  ReceiptFinalState,
  ReceiptSchema,
  type ReceiptService,
  VerificationProblemSchema,
} from "@trellis/contracts/receipts";
import { callerOf, confinedWorkspaceOf } from "@trellis/platform";
import { errors } from "@trellis/runtime";
import { SIGNATURE_ALGORITHM } from "../domain/receipt.js";
import { publicKeyJwkX, publicKeyPem } from "../domain/signing.js";
import type { Verification } from "../domain/verify.js";
import type { KeyRing } from "../keys.js";
import type { ReceiptPage, ReceiptStore } from "../store/receipt-store.js";
import type { ReceiptRow } from "../store/schema.js";
import type { ReceiptVerifier } from "../verifier.js";

const FINAL_STATES: Record<string, ReceiptFinalState> = {
  SUCCEEDED: ReceiptFinalState.SUCCEEDED,
  FAILED: ReceiptFinalState.FAILED,
  CANCELED: ReceiptFinalState.CANCELED,
};

/** A stored receipt as its proto. */
export function receiptToProto(row: ReceiptRow): Receipt {
  return create(ReceiptSchema, {
    id: row.id,
    workspaceId: row.workspace_id,
    subject: { object: row.subject_object, id: row.subject_id },
    taskId: row.task_id,
    sessionId: row.session_id,
    receiptHash: row.receipt_hash,
    previousReceiptHash: row.previous_receipt_hash ?? "",
    chainIndex: BigInt(row.chain_index),
    keyId: row.key_id,
    issuedAt: timestampFromDate(row.issued_at),
    finalState: FINAL_STATES[row.final_state] ?? ReceiptFinalState.UNSPECIFIED,
    schema: schemaOf(row.document),
    documentJson: row.document,
  });
}

function schemaOf(document: string): string {
  // The canonical text sorts keys, so "schema" is found without parsing all of it.
  const match = /"schema":"([^"]*)"/.exec(document);
  return match?.[1] ?? "";
}

/** Whether the caller may see a workspace's receipts. */
export function visibleTo(context: HandlerContext | undefined, workspaceId: string): boolean {
  const scope = confinedWorkspaceOf(context ? callerOf(context) : undefined);
  return scope === undefined || scope === workspaceId;
}

const DEFAULT_PAGE = 50;
const MAX_PAGE = 200;

/** Page size from a request (1…200, default 50). */
export function pageSize(requested: number): number {
  if (!Number.isFinite(requested) || requested <= 0) return DEFAULT_PAGE;
  return Math.min(Math.floor(requested), MAX_PAGE);
}

/** The chain index a page token continues after. */
export function parsePageToken(token: string): bigint | undefined {
  if (!token) return undefined;
  if (!/^\d{1,19}$/.test(token)) throw errors.invalid("page_token is not valid", "page_token");
  return BigInt(token);
}

function nextToken(page: ReceiptPage): string {
  return page.nextAfter === undefined ? "" : page.nextAfter.toString();
}

/** A verification as its proto fields. */
export function verificationFields(result: Verification, checkedAt = new Date()) {
  return {
    valid: result.valid,
    checkedAt: timestampFromDate(checkedAt),
    problems: result.problems.map((p) =>
      create(VerificationProblemSchema, { code: p.code, message: p.message, field: p.field ?? "" }),
    ),
    checks: result.checks,
    receiptId: result.receiptId ?? "",
    keyId: result.keyId ?? "",
  };
}

/** The public keys as protos. */
export function publicKeysToProto(keys: KeyRing): PublicKey[] {
  return keys.list().map((key) =>
    create(PublicKeySchema, {
      keyId: key.keyId,
      algorithm: SIGNATURE_ALGORITHM,
      publicKeyPem: publicKeyPem(key.publicKey),
      jwkX: publicKeyJwkX(key.publicKey),
      current: key.keyId === keys.current.keyId,
      createdAt: timestampFromDate(key.createdAt),
    }),
  );
}

/** Dependencies of the handlers. */
export interface ReceiptHandlerDeps {
  store: ReceiptStore;
  verifier: ReceiptVerifier;
  keys: KeyRing;
}

/** The ReceiptService implementation. */
export function createReceiptServiceImpl(
  deps: ReceiptHandlerDeps,
): ServiceImpl<typeof ReceiptService> {
  const { store, verifier, keys } = deps;

  async function visibleReceipt(id: string, context: HandlerContext): Promise<ReceiptRow> {
    if (!id) throw errors.invalid("receipt_id is required", "receipt_id");
    const row = await store.getReceipt(id);
    if (!row || !visibleTo(context, row.workspace_id)) throw errors.notFound("receipt", id);
    return row;
  }

  return {
    async getReceipt(request, context) {
      return { receipt: receiptToProto(await visibleReceipt(request.receiptId, context)) };
    },

    async verifyReceipt(request, context) {
      const anchor = request.trustAnchorKeyId || undefined;
      switch (request.target.case) {
        case "receiptId": {
          const row = await visibleReceipt(request.target.value, context);
          return verificationFields(await verifier.verifyStored(row, anchor));
        }
        case "documentJson":
          return verificationFields(
            await verifier.verifyDocument(request.target.value, anchor, (workspaceId) =>
              visibleTo(context, workspaceId),
            ),
          );
        default:
          throw errors.invalid("give receipt_id or document_json", "target");
      }
    },

    async listTaskReceipts(request, context) {
      if (!request.taskId) throw errors.invalid("task_id is required", "task_id");
      const page = await store.listTaskReceipts(
        request.taskId,
        pageSize(request.pageSize),
        parsePageToken(request.pageToken),
      );
      const receipts = page.receipts.filter((r) => visibleTo(context, r.workspace_id));
      return { receipts: receipts.map(receiptToProto), nextPageToken: nextToken(page) };
    },

    async listReceipts(request, context) {
      const caller = callerOf(context);
      const workspaceId = request.workspaceId || caller?.workspaceId;
      if (!workspaceId) throw errors.invalid("workspace_id is required", "workspace_id");
      if (!visibleTo(context, workspaceId)) throw errors.notFound("workspace", workspaceId);
      const page = await store.listWorkspaceReceipts(
        workspaceId,
        pageSize(request.pageSize),
        parsePageToken(request.pageToken),
      );
      return { receipts: page.receipts.map(receiptToProto), nextPageToken: nextToken(page) };
    },

    async getPublicKeys() {
      await keys.ensure();
      return { keys: publicKeysToProto(keys), currentKeyId: keys.current.keyId };
    },
  };
}
