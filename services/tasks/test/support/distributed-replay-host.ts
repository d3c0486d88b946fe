/**
 * The replay contract's distributed host: the tasks service on real
 * PostgreSQL and JetStream, called as its mesh peers call it (signed service
 * credentials). Both distributed replay suites use it; they differ only in
 * the environment they add (e.g. TRELLIS_TASKS_JOURNAL=owner).
 */
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createMeshClientInterceptor, runService } from "@trellis/platform";
import { openDeployment } from "@trellis/testkit/deployment";
import pg from "pg";
import { createTasksService } from "../../src/definition.js";
import type { StartHost } from "../replay.contract.js";
import { callingAs, clientsOf } from "./harness.js";

/** A StartHost for the distributed service with `env` added to its environment. */
export function distributedReplayHost(env: Record<string, string> = {}): StartHost {
  return async ({ executor, replayTools }) => {
    const deployment = await openDeployment("tasks_replay", runService, {
      prefix: "replay",
      env: { TRELLIS_SHUTDOWN_GRACE: "1s", ...env },
    });
    const service = await deployment.start(createTasksService({ executor, replayTools }));
    const url = service.address.url;
    const sign = createMeshClientInterceptor(service.mesh, "gateway");
    const sql = new pg.Client({ connectionString: deployment.db.url });
    await sql.connect();
    await sql.query("set search_path to tasks");
    return {
      clients: clientsOf(createGrpcTransport({ baseUrl: url, interceptors: [sign] })),
      as(caller) {
        return clientsOf(
          createGrpcTransport({ baseUrl: url, interceptors: [callingAs(caller), sign] }),
        );
      },
      sql: (text, values) => sql.query(text, values),
      async close() {
        await sql.end();
        await deployment.close();
      },
    };
  };
}
