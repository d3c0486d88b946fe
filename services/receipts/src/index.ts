/**
 * @trellis/receipts: the receipts service, and the receipt primitives other
 * code shares (canonical hashing, signatures, verification, redaction).
 */

export { receiptsService } from "./definition.js";
export {
  type AgentProfile,
  buildApprovalReceipt,
  buildTaskReceipt,
  finalStateOf,
  type IssuerInfo,
  type SealedReceipt,
  sealReceipt,
} from "./domain/build.js";
export {
  canonicalJson,
  computeReceiptHash,
  eventCanonicalJson,
  eventHash,
  hashInput,
  isSha256,
  merkleRoot,
  receiptHashText,
  sha256Of,
} from "./domain/canonical.js";
export {
  type EventFacts,
  extractFacts,
  foldTaskFacts,
  type TaskSummary,
  taskIdOf,
  terminalStatusOf,
} from "./domain/facts.js";
export { effectivePolicy, type ReceiptPolicyName } from "./domain/policy.js";
export {
  isJsonObject,
  RECEIPT_SCHEMA,
  type ReceiptDocument,
  type Sha256,
  type UnsignedReceipt,
} from "./domain/receipt.js";
export {
  containsSecret,
  effectiveVisibility,
  type RedactionDescriptor,
  type RedactionKind,
  type RedactionPolicy,
  redactJson,
  redactMessage,
  redactSecrets,
  toReceiptRedaction,
} from "./domain/redaction.js";
export { replayProjection, replayProjectionValue } from "./domain/replay-projection.js";
export { createSchemaValidator, type SchemaValidator } from "./domain/schema.js";
export {
  deriveKeyId,
  parsePublicKey,
  publicKeyJwkX,
  publicKeyPem,
  type SigningKey,
  signingKeyFromPem,
  signReceiptHash,
  type VerifyingKey,
  verifyReceiptSignature,
} from "./domain/signing.js";
export {
  type Check,
  type Problem,
  type ProblemCode,
  type Verification,
  type VerifyContext,
  verifyReceipt,
} from "./domain/verify.js";
export { receiptsMigrations } from "./store/migrations/index.js";
export {
  type IssueRequest,
  type IssueResult,
  PostgresReceiptStore,
  type ReceiptStore,
} from "./store/receipt-store.js";
