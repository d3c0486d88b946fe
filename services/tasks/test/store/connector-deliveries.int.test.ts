// Connector deliveries at the store and handler level, on PGlite and on a
// real PostgreSQL: the unique (connector, delivery id) lets exactly one of
// many concurrent deliveries of an id through; a delivery stored but never
// turned into a task (a crash in between) is finished by its redelivery,
// from what was stored; a delivery that cannot become a task is FAILED with
// `connector.failed` (one per failed attempt), and stays one row however
// often it is retried.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { ActorKind, ActorSchema } from "@trellis/contracts/core";
import { ConnectorDeliveryMode, ConnectorService, ConnectorStatus } from "@trellis/contracts/tasks";
import { errorDetailOf } from "@trellis/runtime";
import { createDatabase, createOutboxWriter, type Database, readOutbox } from "@trellis/storage";
import { createTestDatabase, type TestDatabase } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { normalizeDelivery } from "../../src/domain/connectors.js";
import { type HandlerDeps, withErrorDetails } from "../../src/handlers/common.js";
import { createConnectorHandlers } from "../../src/handlers/connector-handlers.js";
import { PostgresConnectorStore } from "../../src/store/connector-store.js";
import { PostgresTaskStore } from "../../src/store/postgres-task-store.js";
import { migrateTasksStore } from "../support/store-suites.js";

const backends = [
  {
    name: "PGlite",
    open: async () => ({
      database: await createDatabase({ kind: "pglite" }),
      drop: async () => {},
    }),
  },
  {
    name: "PostgreSQL",
    open: async () => {
      const db: TestDatabase = await createTestDatabase("trellis_connectors");
      return {
        database: await createDatabase({ kind: "postgres", url: db.url, poolSize: 12 }),
        drop: () => db.drop(),
      };
    },
  },
];

describe.each(backends)("connector deliveries on $name", ({ open }) => {
  let database: Database;
  let drop: () => Promise<void>;
  let store: PostgresTaskStore;
  let connectors: PostgresConnectorStore;
  let client: ReturnType<typeof createClient<typeof ConnectorService>>;
  const context = {
    actor: create(ActorSchema, { id: "provider-relay", kind: ActorKind.SERVICE }),
  };

  beforeAll(async () => {
    ({ database, drop } = await open());
    await migrateTasksStore(database, "outbox_c");
    const outbox = createOutboxWriter({ schema: "outbox_c" });
    store = new PostgresTaskStore({ database, schema: "tasks", outbox, leaseMs: 30_000 });
    connectors = new PostgresConnectorStore({ database, schema: "tasks", outbox });
    // The handlers need the store, and a runner only to hand claimed turns to
    // (none run here: this is about what is stored).
    const deps = {
      store,
      owner: "test-owner",
      runner: { dispatch: () => undefined },
    } as unknown as HandlerDeps;
    const transport = createRouterTransport(({ service }) => {
      service(
        ConnectorService,
        withErrorDetails(ConnectorService, createConnectorHandlers(deps, connectors)),
      );
    });
    client = createClient(ConnectorService, transport);
  }, 60_000);

  afterAll(async () => {
    await database?.close();
    await drop?.();
  });

  async function newConnector(targetSessionId = "") {
    return connectors.create(
      {
        workspaceId: "default",
        provider: "github",
        status: ConnectorStatus.ACTIVE,
        eventKinds: [],
        deliveryMode: ConnectorDeliveryMode.TASK,
        targetPersonaId: "",
        targetSessionId,
      },
      undefined,
      context,
    );
  }

  async function connectorEvents(connectorId: string): Promise<string[]> {
    const rows = await readOutbox(database, "outbox_c", { limit: 10_000 });
    return rows
      .filter(
        (row) =>
          row.event.resource?.object === "connector" && row.event.resource.id === connectorId,
      )
      .map((row) => row.event.kind);
  }

  it("stores one of many concurrent deliveries of an id; the others find it", async () => {
    const connector = await newConnector();
    const normalized = normalizeDelivery(connector, {
      deliveryId: "race-1",
      eventKind: "push",
      payload: { ref: "main" },
      text: "",
    });
    const results = await Promise.all(
      Array.from({ length: 20 }, () => connectors.record(connector, normalized, context)),
    );
    expect(results.filter((r) => r.first)).toHaveLength(1);
    expect(new Set(results.map((r) => r.delivery.id)).size).toBe(1);
    const kinds = await connectorEvents(connector.id);
    expect(kinds.filter((k) => k === "connector.delivery_received")).toHaveLength(1);
    expect(kinds.filter((k) => k === "connector.normalized")).toHaveLength(1);
    expect(kinds.filter((k) => k === "connector.delivery_deduped")).toHaveLength(19);
  });

  it("makes one task of concurrent deliveries through the handler", async () => {
    const connector = await newConnector();
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        client.deliverConnectorEvent({
          connectorId: connector.id,
          deliveryId: "race-2",
          eventKind: "push",
          payload: { n: 1 },
        }),
      ),
    );
    expect(answers.filter((a) => !a.deduplicated)).toHaveLength(1);
    const taskIds = new Set(answers.map((a) => a.delivery?.taskId));
    expect(taskIds.size).toBe(1);
    const sessionId = answers[0]?.delivery?.sessionId ?? "";
    const page = await store.listTasks({ sessionId, statuses: [] }, { pageSize: 0, pageToken: "" });
    expect(page.items.map((t) => t.id)).toEqual([...taskIds]);
  });

  it("finishes a delivery stored before a crash when it is delivered again", async () => {
    const connector = await newConnector();
    const normalized = normalizeDelivery(connector, {
      deliveryId: "crash-1",
      eventKind: "push",
      payload: { first: true },
      text: "as first sent",
    });
    // The first attempt stored the delivery, then stopped before the task.
    const stored = await connectors.record(connector, normalized, context);
    expect(stored.delivery.state).toBe("RECEIVED");
    // The redelivery (its payload differs: the stored one counts).
    const again = await client.deliverConnectorEvent({
      connectorId: connector.id,
      deliveryId: "crash-1",
      eventKind: "push",
      payload: { first: false },
      text: "as redelivered",
    });
    expect(again.deduplicated).toBe(true);
    expect(again.delivery).toMatchObject({ id: stored.delivery.id, state: "SUBMITTED" });
    const task = await store.getTask(again.delivery?.taskId ?? "");
    const input = task.input?.parts[0]?.kind;
    expect(input?.case === "text" ? input.value.text : "").toBe("as first sent");
    const once = await client.deliverConnectorEvent({
      connectorId: connector.id,
      deliveryId: "crash-1",
      eventKind: "push",
    });
    expect(once.delivery?.taskId).toBe(task.id);
    const kinds = await connectorEvents(connector.id);
    expect(kinds.filter((k) => k === "connector.task_submitted")).toHaveLength(1);
  });

  it("records a delivery that cannot become a task as FAILED, in one row", async () => {
    const session = await store.createSession(
      { workspaceId: "default", initialMessages: [] },
      context,
    );
    const connector = await newConnector(session.id);
    await store.closeSession(session.id, "done", context);
    for (let i = 0; i < 2; i++) {
      const refused = await client
        .deliverConnectorEvent({
          connectorId: connector.id,
          deliveryId: "closed-1",
          eventKind: "push",
        })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      // The closed session's own refusal reaches the sender (a redelivery tries again).
      expect(refused?.code).toBe(Code.Aborted);
      expect(refused && errorDetailOf(refused)?.reason).toBe("conflict");
    }
    const row = await connectors.find(connector.id, "closed-1");
    expect(row).toMatchObject({ state: "FAILED", taskId: "" });
    expect(row?.failure).not.toBe("");
    const kinds = await connectorEvents(connector.id);
    // One connector.failed per failed attempt; the delivery itself is stored once.
    expect(kinds.filter((k) => k === "connector.failed")).toHaveLength(2);
    expect(kinds.filter((k) => k === "connector.delivery_received")).toHaveLength(1);
  });

  it("sets a status inside the caller's workspace only; FAILED is an event", async () => {
    const connector = await newConnector();
    await expect(
      connectors.setStatus(connector.id, ConnectorStatus.PAUSED, "", {
        ...context,
        scope: "other",
      }),
    ).rejects.toMatchObject({ reason: "resource_not_found" });
    expect((await connectors.get(connector.id)).status).toBe(ConnectorStatus.ACTIVE);
    const failed = await connectors.setStatus(
      connector.id,
      ConnectorStatus.FAILED,
      "token revoked",
      context,
    );
    expect(failed).toMatchObject({ status: ConnectorStatus.FAILED, statusReason: "token revoked" });
    expect(await connectorEvents(connector.id)).toEqual(["connector.failed"]);
    const refused = await client
      .deliverConnectorEvent({ connectorId: connector.id, deliveryId: "late", eventKind: "push" })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(refused?.code).toBe(Code.Aborted);
    expect(await connectors.find(connector.id, "late")).toBeUndefined();
  });
});
