/**
 * The server of `rpc-stack.bench.ts`: one trivial unary RPC
 * (`SessionService.GetSession`, a constant answer) served three ways, named
 * by the first argument:
 *
 * - `raw`: a bare Connect handler on an h2c server (the floor);
 * - `runtime`: `createService` of `@trellis/runtime`, as every Trellis
 *   service is built (request id, server span, metrics, request checks,
 *   error mapping);
 * - `internal`: the same plus the mesh interceptor an internal service
 *   verifies every call with (the client signs with the same
 *   `TRELLIS_MESH_SECRET`).
 *
 * Listens on 127.0.0.1 at the port of the second argument; prints `ready`.
 */
import * as http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { GetSessionResponseSchema, SessionService } from "@trellis/contracts/tasks";
import { createMeshServerInterceptor, processMeshCredentials } from "@trellis/platform";
import { createService } from "@trellis/runtime";

const mode = process.argv[2];
const port = Number(process.argv[3] ?? 0);
const response = create(GetSessionResponseSchema, {
  session: { id: "ses_bench", workspaceId: "default", agentId: "agt_bench" },
});
const routes = (router: ConnectRouter) => {
  router.service(SessionService, { getSession: () => response });
};

if (mode === "raw") {
  const server = http2.createServer(connectNodeAdapter({ routes }));
  server.listen(port, "127.0.0.1", () => process.stdout.write("ready\n"));
} else if (mode === "runtime" || mode === "internal") {
  const service = createService({
    name: "bench",
    routes,
    interceptors:
      mode === "internal" ? [createMeshServerInterceptor(processMeshCredentials())] : [],
  });
  await service.listen({ host: "127.0.0.1", port });
  process.stdout.write("ready\n");
} else {
  throw new Error(`rpc-stack-server: raw, runtime or internal, not ${JSON.stringify(mode)}`);
}
