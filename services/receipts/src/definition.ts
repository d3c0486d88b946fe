/**
 * The receipts service: signed, hash-chained receipts built from the event log, and their verification.
 */
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";

/** The receipts service, runnable embedded or as its own process. */
export const receiptsService: ServiceDefinition = {
  name: "receipts",
  provides: [],
  defaultPort: DEFAULT_PORTS.receipts ?? 0,
  create() {
    return {};
  },
};
