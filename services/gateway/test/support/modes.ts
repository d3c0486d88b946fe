/**
 * The two ways the gateway's black-box suites run Trellis: embedded (one
 * process, PGlite, in-process log) and distributed (tasks, optionally
 * receipts, and the gateway as separate services on a real PostgreSQL and a
 * real NATS JetStream, with their own database and stream prefix).
 */
import { randomBytes } from "node:crypto";
import { adaptersService } from "@trellis/adapters";
import { startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { gatewayService } from "../../src/definition.js";
import { ADMIN_KEY } from "./conformance.js";
import { openDeployment } from "./deployment.js";

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
    const deployment = await openDeployment(`trellis_${options.name}`, {
      prefix: options.name,
      ...(options.meshEnv ? { env: options.meshEnv } : {}),
    });
    try {
      const urls: Record<string, string> = {};
      if (options.adapters) {
        const adapters = await deployment.start(adaptersService, {
          TRELLIS_ADAPTERS_REMOTE: "false",
          TRELLIS_VAULT_KEY: randomBytes(32).toString("base64"),
        });
        urls.TRELLIS_ADAPTERS_URL = adapters.address.url;
      }
      const tasks = await deployment.start(tasksService, urls);
      urls.TRELLIS_TASKS_URL = tasks.address.url;
      if (options.receipts) {
        const receipts = await deployment.start(receiptsService, urls);
        urls.TRELLIS_RECEIPTS_URL = receipts.address.url;
      }
      const gateway = await deployment.start(gatewayService, { ...env, ...urls });
      return { url: gateway.address.url, close: () => deployment.close() };
    } catch (error) {
      await deployment.close();
      throw error;
    }
  }

  return [
    { mode: "embedded (PGlite, in-process log)", start: embedded },
    { mode: "distributed (PostgreSQL, JetStream)", start: distributed },
  ];
}
