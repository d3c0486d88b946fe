// Replay and fork in embedded mode (PGlite, the in-process event log).
import { createGrpcTransport } from "@connectrpc/connect-node";
import { startEmbedded } from "@trellis/platform";
import { createTasksService } from "../src/definition.js";
import { describeReplay } from "./replay.contract.js";
import { callingAs, clientsOf } from "./support/harness.js";

describeReplay("embedded", async ({ executor, replayTools }) => {
  const trellis = await startEmbedded({
    services: [createTasksService({ executor, replayTools })],
    port: 0,
    env: { ...process.env, TRELLIS_LOG_LEVEL: "error" },
  });
  const url = trellis.address.url;
  return {
    clients: clientsOf(createGrpcTransport({ baseUrl: url })),
    as(caller) {
      return clientsOf(createGrpcTransport({ baseUrl: url, interceptors: [callingAs(caller)] }));
    },
    close: () => trellis.close({ graceMs: 1000 }),
  };
});
