/** The receipts service's migrations, by name (applied in name order). */
import type { Migration } from "kysely";
import { createReceipts } from "./2026_11_22_create_receipts.js";

export const receiptsMigrations: Record<string, Migration> = {
  "2026_11_22_create_receipts": createReceipts,
};
