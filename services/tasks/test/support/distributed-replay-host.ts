/**
 * The replay contract's distributed host: the tasks service on real
 * PostgreSQL and JetStream, called as its mesh peers call it (signed service
 * credentials). Both distributed replay suites use it; they differ only in
 * the environment they add (e.g. TRELLIS_TASKS_JOURNAL=owner).
 */
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createMeshClientInterceptor, runService, setCallerHeaders } from "@trellis/platform";
import { createTestDatabase, deleteTestStreams, testNatsUrl, uniqueName } from "@trellis/testkit";
import pg from "pg";
import { createTasksService } from "../../src/definition.js";
import type { StartHost } from "../replay.contract.js";
import { clientsOf } from "./harness.js";

/** A StartHost for the distributed service with `env` added to its environment. */
export function distributedReplayHost(env: Record<string, string> = {}): StartHost {
  return async ({ executor, replayTools }) => {
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
        ...env,
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
  };
}
