/**
 * Embedded Trellis for gateway tests: the gateway and tasks service alone
 * ({@link startGatewayWithTasks}; {@link gatewayWithTasks} for one test
 * file), or with adapters too for one test file
 * ({@link embeddedGateway}: started before its tests with `adminKey` as the
 * admin key, closed after them; API keys of chosen scopes are minted
 * straight into the gateway's key store).
 */
import { adaptersService } from "@trellis/adapters";
import { harnClient } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { afterAll, beforeAll } from "vitest";
import { gatewayService } from "../../src/definition.js";
import { PostgresKeyStore } from "../../src/store/key-store.js";

/**
 * The gateway and the tasks service embedded on a free port, `adminKey` as
 * the admin key, logging only errors; `env` adds settings (or overrides).
 * With `dataDir` it keeps its data there (to start again on it), else in
 * memory. The caller closes it.
 */
export function startGatewayWithTasks(
  adminKey: string,
  env: Record<string, string> = {},
  options: { dataDir?: string } = {},
): Promise<EmbeddedTrellis> {
  return startEmbedded({
    services: [gatewayService, tasksService],
    port: 0,
    dataDir: options.dataDir,
    logger: createLogger({ service: "test", level: "error" }),
    env: { TRELLIS_API_KEY: adminKey, TRELLIS_LOG_LEVEL: "error", ...env },
  });
}

/** The gateway and tasks service of one test file; valid once its beforeAll ran. */
export interface GatewayWithTasks {
  readonly trellis: EmbeddedTrellis;
  /** The gateway's base URL (REST and Connect). */
  readonly base: string;
  /** A Harn client with the admin key. */
  readonly admin: ReturnType<typeof harnClient>;
}

/**
 * Registers the start ({@link startGatewayWithTasks}, `adminKey` as the admin
 * key) before the file's tests and the close after them.
 */
export function gatewayWithTasks(adminKey: string): GatewayWithTasks {
  let trellis: EmbeddedTrellis | undefined;
  let admin: ReturnType<typeof harnClient> | undefined;
  beforeAll(async () => {
    trellis = await startGatewayWithTasks(adminKey);
    admin = harnClient(trellis.address.url, adminKey);
  });
  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });
  const started = (): EmbeddedTrellis => {
    if (!trellis) throw new Error("gateway with tasks: not started");
    return trellis;
  };
  return {
    get trellis() {
      return started();
    },
    get base() {
      return started().address.url;
    },
    get admin() {
      if (!admin) throw new Error("gateway with tasks: not started");
      return admin;
    },
  };
}

/** The gateway's API key store in `trellis`, to mint keys of chosen scopes straight into it. */
export function gatewayKeyStore(trellis: EmbeddedTrellis): PostgresKeyStore {
  const gateway = trellis.contexts.get("gateway");
  if (!gateway) throw new Error("embedded gateway: no gateway service");
  return new PostgresKeyStore(gateway.db, gateway.schema);
}

/** The running deployment; valid once the file's beforeAll ran. */
export interface EmbeddedGateway {
  readonly trellis: EmbeddedTrellis;
  /** The gateway's base URL (REST and gRPC). */
  readonly base: string;
  /** A new API key of `workspaceId` with `scopes`. */
  keyWith(workspaceId: string, scopes: string[]): Promise<string>;
  /** A Harn client with a new key of `workspaceId` and `scopes`. */
  clientWith(workspaceId: string, scopes: string[]): Promise<ReturnType<typeof harnClient>>;
}

/** Registers the start and close of the deployment; `name` names the keys it mints. */
export function embeddedGateway(name: string, adminKey: string): EmbeddedGateway {
  let trellis: EmbeddedTrellis | undefined;
  let keys: PostgresKeyStore | undefined;
  beforeAll(async () => {
    trellis = await startEmbedded({
      services: [gatewayService, tasksService, adaptersService],
      port: 0,
      logger: createLogger({ service: "test", level: "error" }),
      env: { TRELLIS_API_KEY: adminKey, TRELLIS_LOG_LEVEL: "error" },
    });
    keys = gatewayKeyStore(trellis);
  }, 60_000);
  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });
  const started = (): EmbeddedTrellis => {
    if (!trellis) throw new Error("embedded gateway: not started");
    return trellis;
  };
  const keyWith = async (workspaceId: string, scopes: string[]): Promise<string> => {
    if (!keys) throw new Error("embedded gateway: not started");
    return (await keys.create({ name, actorId: name, workspaceId, scopes })).key;
  };
  return {
    get trellis() {
      return started();
    },
    get base() {
      return started().address.url;
    },
    keyWith,
    async clientWith(workspaceId, scopes) {
      return harnClient(started().address.url, await keyWith(workspaceId, scopes));
    },
  };
}
