// Replay and fork in distributed owner mode (TRELLIS_TASKS_JOURNAL=owner:
// sessions owned under leases): real PostgreSQL and JetStream, the
// service called as its mesh peers call it (signed service credentials).
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createMeshClientInterceptor, runService, setCallerHeaders } from "@trellis/platform";
import { createTestDatabase, deleteTestStreams, testNatsUrl, uniqueName } from "@trellis/testkit";
import pg from "pg";
import { createTasksService } from "../src/definition.js";
import { describeReplay } from "./replay.contract.js";
import { clientsOf } from "./support/harness.js";

describeReplay("distributed, session owner under leases", async ({ executor, replayTools }) => {
  const database = await createTestDatabase("tasks_replay");
  const prefix = uniqueName("replay").replaceAll("-", "_");
  const service = await runService(createTasksService({ executor, replayTools }), {
    env: {
      TRELLIS_LOG_LEVEL: "error",
      DATABASE_URL: database.url,
      NATS_URL: testNatsUrl,
      TRELLIS_NATS_PREFIX: prefix,
      PORT: "0",
      TRELLIS_SHUTDOWN_GRACE: "1s",
      TRELLIS_TASKS_JOURNAL: "owner",
    },
    handleSignals: false,
  });
  const url = service.address.url;
  const sign = createMeshClientInterceptor(service.mesh, "gateway");
  const sql = new pg.Client({ connectionString: database.url });
  await sql.connect();
  await sql.query("set search_path to tasks");
  return {
    clients: clientsOf(createGrpcTransport({ baseUrl: url, interceptors: [sign] })),
    as(caller) {
      return clientsOf(
        createGrpcTransport({
          baseUrl: url,
          interceptors: [
            (next) => (req) => {
              // Bound to its workspace: an admin credential (`*`) would see every one.
              setCallerHeaders(req.header, { ...caller, scopes: ["sessions:*", "tasks:*"] });
              return next(req);
            },
            sign,
          ],
        }),
      );
    },
    sql: (text, values) => sql.query(text, values),
    async close() {
      await sql.end();
      await service.close();
      await database.drop();
      await deleteTestStreams(prefix);
    },
  };
});
