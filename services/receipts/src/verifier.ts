/**
 * Verification of stored receipts and of receipt documents handed in:
 * gathers what storage knows (stored text and hash, chain neighbours, public
 * keys) and runs the pure {@link verifyReceipt}.
 */
import type { ReceiptsConfig } from "./config.js";
import { isJsonObject } from "./domain/receipt.js";
import { type Verification, verifyReceipt } from "./domain/verify.js";
import type { KeyRing } from "./keys.js";
import type { ReceiptStore } from "./store/receipt-store.js";
import type { ReceiptRow } from "./store/schema.js";

/** Verifies receipts against this service's chain and keys. */
export class ReceiptVerifier {
  constructor(
    private readonly store: ReceiptStore,
    private readonly keys: KeyRing,
    private readonly config: Pick<ReceiptsConfig, "validateSchema">,
  ) {}

  /** Verify a stored receipt: every check, the stored bytes included. */
  async verifyStored(row: ReceiptRow, trustAnchorKeyId?: string): Promise<Verification> {
    await this.keys.ensure(row.key_id);
    const chain = await this.store.chainContext(row);
    return verifyReceipt(row.document, {
      publicKey: (id) => this.keys.publicKey(id),
      storedText: row.document,
      storedHash: row.receipt_hash,
      chain,
      ...(this.config.validateSchema ? { validateSchema: this.config.validateSchema } : {}),
      ...(trustAnchorKeyId ? { trustAnchorKeyId } : {}),
    });
  }

  /**
   * Verify a receipt document from elsewhere (an exported file): hash and
   * signature with this service's keys; when this service issued it, also
   * its recorded hash and chain links (not its bytes: a file may be
   * re-formatted).
   */
  async verifyDocument(
    text: string,
    trustAnchorKeyId?: string,
    canSee: (workspaceId: string) => boolean = () => true,
  ): Promise<Verification> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const doc = isJsonObject(parsed) ? parsed : {};
    const signatures = Array.isArray(doc.signatures) ? doc.signatures : [];
    for (const signature of signatures) {
      if (isJsonObject(signature) && typeof signature.key_id === "string") {
        await this.keys.ensure(signature.key_id);
      }
    }
    const stored =
      typeof doc.receipt_id === "string" ? await this.store.getReceipt(doc.receipt_id) : undefined;
    // Another workspace's receipt lends nothing (not even whether it exists).
    const row = stored && canSee(stored.workspace_id) ? stored : undefined;
    return verifyReceipt(parsed === undefined ? text : parsed, {
      publicKey: (id) => this.keys.publicKey(id),
      ...(row ? { storedHash: row.receipt_hash, chain: await this.store.chainContext(row) } : {}),
      ...(this.config.validateSchema ? { validateSchema: this.config.validateSchema } : {}),
      ...(trustAnchorKeyId ? { trustAnchorKeyId } : {}),
    });
  }
}
