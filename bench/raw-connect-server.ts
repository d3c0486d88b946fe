/**
 * The floor every turn benchmark compares against: a bare Connect server (no
 * Trellis runtime, no interceptors) answering one trivial unary RPC over h2c.
 * Started as a child process by the benchmarks; prints "ready <url>".
 */
import * as http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { health } from "@trellis/contracts/grpc";

const port = Number(process.argv[2] ?? 0);
const response = create(health.HealthCheckResponseSchema, {
  status: health.HealthCheckResponse_ServingStatus.SERVING,
});
const handler = connectNodeAdapter({
  routes(router) {
    router.service(health.Health, {
      check: () => response,
      list: () => create(health.HealthListResponseSchema),
      async *watch() {},
    });
  },
});
const server = http2.createServer(handler);
server.listen(port, "127.0.0.1", () => {
  const address = server.address();
  const actual = typeof address === "object" && address ? address.port : port;
  process.stdout.write(`ready http://127.0.0.1:${actual}\n`);
});
process.on("SIGTERM", () => {
  server.close();
  process.exit(0);
});
