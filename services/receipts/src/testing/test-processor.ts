/**
 * The receipt processor as the receipts tests and benchmarks run it: the
 * test issuer, a 3 s wait for a task's missing events, and a logger that
 * writes errors only.
 */
import { createLogger, type Logger } from "@trellis/runtime";
import { ReceiptProcessor, type ReceiptProcessorOptions } from "../processor.js";
import { issuer } from "./receipt-helpers.js";

/** A logger of the tests that writes errors only. */
export function quietLogger(): Logger {
  return createLogger({ service: "test", level: "error" });
}

/** Options of {@link testProcessor}: a processor's, whose config and logger have test defaults. */
export type TestProcessorOptions = Omit<ReceiptProcessorOptions, "config" | "logger"> &
  Partial<Pick<ReceiptProcessorOptions, "config" | "logger">>;

/** A processor with the test defaults (see the module comment) where `options` name none. */
export function testProcessor(options: TestProcessorOptions): ReceiptProcessor {
  return new ReceiptProcessor({
    config: { issuer, gapWaitMs: 3_000 },
    logger: quietLogger(),
    ...options,
  });
}
