/**
 * The receipts service: signed, hash-chained receipts built from the event
 * log, and their verification (gRPC `trellis.receipts.v1.ReceiptService` and
 * the Harn REST routes).
 */
import { file_trellis_receipts_v1_receipts, ReceiptService } from "@trellis/contracts/receipts";
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";
import { createAgentDirectory } from "./agents.js";
import { loadReceiptsConfig } from "./config.js";
import { type ReceiptConsumer, startReceiptConsumer } from "./consumer.js";
import { createReceiptServiceImpl } from "./handlers/receipt-service.js";
import { createReceiptsHttpHandler } from "./http/rest.js";
import { loadKeyRing } from "./keys.js";
import { ReceiptProcessor } from "./processor.js";
import { receiptsMigrations } from "./store/migrations/index.js";
import { PostgresReceiptStore } from "./store/receipt-store.js";
import { logTaskHistory } from "./task-history.js";
import { ReceiptVerifier } from "./verifier.js";

/** The receipts service, runnable embedded or as its own process. */
export const receiptsService: ServiceDefinition = {
  name: "receipts",
  provides: [ReceiptService],
  migrations: receiptsMigrations,
  defaultPort: DEFAULT_PORTS.receipts ?? 0,
  async create(ctx) {
    const config = loadReceiptsConfig(ctx.env);
    const store = new PostgresReceiptStore({
      database: ctx.db,
      schema: ctx.schema,
      outbox: ctx.outbox,
    });
    const keys = await loadKeyRing({
      config,
      store,
      database: ctx.db,
      logger: ctx.logger,
      mode: ctx.mode,
      ...(ctx.dataDir ? { dataDir: ctx.dataDir } : {}),
    });
    const verifier = new ReceiptVerifier(store, keys, config);
    const processor = new ReceiptProcessor({
      store,
      keys,
      directory: createAgentDirectory({ clients: ctx.clients, logger: ctx.logger }),
      config,
      logger: ctx.logger,
      // Embedded mode has one process, so one consumer: it sees every event,
      // and its log (the outbox) is durable: a task's history is read there.
      ...(ctx.mode === "embedded"
        ? { exclusive: true, history: logTaskHistory(ctx.eventLog) }
        : {}),
    });
    let consumer: ReceiptConsumer | undefined;
    return {
      routes(router) {
        router.service(ReceiptService, createReceiptServiceImpl({ store, verifier, keys }));
      },
      http: createReceiptsHttpHandler({ store, verifier, keys, logger: ctx.logger }),
      reflectionFiles: [file_trellis_receipts_v1_receipts],
      async start() {
        consumer = startReceiptConsumer({
          eventLog: ctx.eventLog,
          processor,
          logger: ctx.logger,
          ackWaitMs: config.ackWaitMs,
          issueLingerMs: config.batchLingerMs,
        });
      },
      async stop() {
        await consumer?.stop();
        consumer = undefined;
      },
    };
  },
};
