/**
 * The two deployments the conformance flows run against, each started as its
 * command starts it: embedded (`npm start`: every service in one process on
 * PGlite and the in-process log) and distributed (`trellis mesh`: every
 * service its own process on PostgreSQL and NATS JetStream).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { createTestDatabase, deleteTestStreams, testNatsUrl, uniqueName } from "@trellis/testkit";
import { startMesh } from "../../src/mesh.js";
import { allServices } from "../../src/services.js";

/** The admin key the deployment is started with (what `npm start` prints). */
export const ADMIN_KEY = `trellis-conformance-admin-${randomBytes(12).toString("hex")}`;

/** A running deployment. */
export interface Target {
  url: string;
  stop(): Promise<void>;
}

/** How a suite starts a deployment. */
export interface TargetKind {
  name: string;
  start(): Promise<Target>;
}

// What both deployments are given beside their defaults: the admin key, a
// vault key (secrets can be stored), and webhooks to loopback receivers
// (`trellis dev` allows them by default when bound to loopback).
const env = {
  TRELLIS_API_KEY: ADMIN_KEY,
  TRELLIS_VAULT_KEY: randomBytes(32).toString("base64"),
  TRELLIS_WEBHOOKS_ALLOW_PRIVATE: "1",
  TRELLIS_WEBHOOK_RETRY_BASE: "100ms",
  TRELLIS_LOG_LEVEL: "error",
};

/** Embedded, as `npm start` runs it. */
export const embedded: TargetKind = {
  name: "embedded (npm start: PGlite, in-process log)",
  async start() {
    const dataDir = mkdtempSync(join(tmpdir(), "trellis-harn-"));
    const trellis = await startEmbedded({
      services: allServices,
      dataDir: join(dataDir, "data"),
      port: 0,
      env: { ...process.env, ...env },
      logger: createLogger({ service: "conformance", level: "error" }),
    });
    return {
      url: trellis.address.url,
      stop: async () => {
        await trellis.close({ graceMs: 500 });
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  },
};

/** Distributed, as `trellis mesh` runs it. */
export const distributed: TargetKind = {
  name: "distributed (trellis mesh: PostgreSQL, JetStream)",
  async start() {
    const prefix = uniqueName("harn");
    const db = await createTestDatabase("trellis_harn");
    const logDir = mkdtempSync(join(tmpdir(), "trellis-harn-mesh-"));
    try {
      const mesh = await startMesh({
        databaseUrl: db.url,
        natsUrl: testNatsUrl,
        natsPrefix: prefix,
        logDir,
        env,
        readyTimeoutMs: 120_000,
      });
      return {
        url: mesh.urls.gateway as string,
        stop: async () => {
          await mesh.stop();
          await deleteTestStreams(prefix).catch(() => undefined);
          await db.drop();
          rmSync(logDir, { recursive: true, force: true });
        },
      };
    } catch (error) {
      await db.drop();
      throw error;
    }
  },
};
