/**
 * The two ways the gateway's black-box suites run Trellis: embedded (one
 * process, PGlite, in-process log) and distributed (tasks, optionally
 * receipts, and the gateway as separate services on a real PostgreSQL and a
 * real NATS JetStream, with their own database and stream prefix).
 */
import { randomBytes } from "node:crypto";
import { adaptersService } from "@trellis/adapters";
import { type RunningService, runService, startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { createTestDatabase, deleteTestStreams, testNatsUrl, uniqueName } from "@trellis/testkit";
import { gatewayService } from "../../src/definition.js";
import { ADMIN_KEY } from "./conformance.js";

/** A running Trellis a suite talks to through the gateway's URL. */
export interface Running {
  url: string;
  close(): Promise<void>;
}

/** Options of {@link gatewayModes}. */
export interface GatewayModeOptions {
  /** Names the test database (`trellis_<name>`) and stream prefix. */
  name: string;
  /** Also run the receipts service. */
  receipts?: boolean;
  /** Extra gateway settings (the admin key and quiet logs are always set). */
  env?: Record<string, string>;
  /** Also run the adapters service (vaults). */
  adapters?: boolean;
  /** Settings of every service (e.g. `TRELLIS_A2A_ALLOW_PRIVATE` for the tasks service's backends). */
  meshEnv?: Record<string, string>;
}

/** Both modes, as `{ mode, start }` rows for `describe.each`. */
export function gatewayModes(options: GatewayModeOptions) {
  const env = {
    TRELLIS_API_KEY: ADMIN_KEY,
    TRELLIS_LOG_LEVEL: "error",
    ...options.meshEnv,
    ...options.env,
  };

  async function embedded(): Promise<Running> {
    const trellis = await startEmbedded({
      services: [
        gatewayService,
        tasksService,
        ...(options.receipts ? [receiptsService] : []),
        ...(options.adapters ? [adaptersService] : []),
      ],
      port: 0,
      env,
      logger: createLogger({ service: "test", level: "error" }),
    });
    return { url: trellis.address.url, close: () => trellis.close({ graceMs: 500 }) };
  }

  async function distributed(): Promise<Running> {
    const prefix = uniqueName(options.name);
    const db = await createTestDatabase(`trellis_${options.name}`);
    const common = {
      DATABASE_URL: db.url,
      NATS_URL: testNatsUrl,
      TRELLIS_NATS_PREFIX: prefix,
      PORT: "0",
      TRELLIS_SHUTDOWN_GRACE: "200ms",
      TRELLIS_LOG_LEVEL: "error",
      ...options.meshEnv,
    };
    const started: RunningService[] = [];
    const close = async () => {
      for (const service of started.reverse()) await service.close();
      await deleteTestStreams(prefix).catch(() => undefined);
      await db.drop();
    };
    try {
      const urls: Record<string, string> = {};
      if (options.adapters) {
        const adapters = await runService(adaptersService, {
          env: {
            ...common,
            TRELLIS_ADAPTERS_REMOTE: "false",
            TRELLIS_VAULT_KEY: randomBytes(32).toString("base64"),
          },
          handleSignals: false,
        });
        started.push(adapters);
        urls.TRELLIS_ADAPTERS_URL = adapters.address.url;
      }
      const tasks = await runService(tasksService, {
        env: { ...common, ...urls },
        handleSignals: false,
      });
      started.push(tasks);
      urls.TRELLIS_TASKS_URL = tasks.address.url;
      if (options.receipts) {
        const receipts = await runService(receiptsService, {
          env: { ...common, ...urls },
          handleSignals: false,
        });
        started.push(receipts);
        urls.TRELLIS_RECEIPTS_URL = receipts.address.url;
      }
      const gateway = await runService(gatewayService, {
        env: { ...common, ...env, ...urls },
        handleSignals: false,
      });
      started.push(gateway);
      return { url: gateway.address.url, close };
    } catch (error) {
      await close();
      throw error;
    }
  }

  return [
    { mode: "embedded (PGlite, in-process log)", start: embedded },
    { mode: "distributed (PostgreSQL, JetStream)", start: distributed },
  ];
}
