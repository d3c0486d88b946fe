// A service in distributed mode reports its dependencies truthfully and
// survives them restarting.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { health } from "@trellis/contracts/grpc";
import {
  createTestDatabase,
  eventually,
  type TestDatabase,
  ThrowawayNats,
  uniqueName,
} from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningService, runService, type ServiceDefinition } from "../src/index.js";

const probe: ServiceDefinition = {
  name: "probe",
  provides: [],
  defaultPort: 0,
  create: () => ({}),
};

describe("distributed service", () => {
  let db: TestDatabase;
  let nats: ThrowawayNats;
  let running: RunningService;

  beforeAll(async () => {
    db = await createTestDatabase("trellis_dist");
    nats = await ThrowawayNats.start();
    running = await runService(probe, {
      env: {
        DATABASE_URL: db.url,
        NATS_URL: nats.url,
        TRELLIS_NATS_PREFIX: uniqueName("dist"),
        PORT: "0",
        TRELLIS_SHUTDOWN_GRACE: "200ms",
      },
      handleSignals: false,
    });
  }, 60_000);

  afterAll(async () => {
    await running?.close();
    await nats?.dispose();
    await db?.drop();
  });

  it("is NOT_SERVING while NATS is down and SERVING again once it is back", async () => {
    const client = createClient(
      health.Health,
      createGrpcTransport({ baseUrl: running.address.url }),
    );
    const status = async () => (await client.check({ service: "" })).status;
    expect(await status()).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    await nats.stop();
    await eventually(
      async () => (await status()) === health.HealthCheckResponse_ServingStatus.NOT_SERVING,
      {
        timeoutMs: 15_000,
        what: "NOT_SERVING after NATS stopped",
      },
    );
    await nats.start();
    await eventually(
      async () => (await status()) === health.HealthCheckResponse_ServingStatus.SERVING,
      {
        timeoutMs: 20_000,
        what: "SERVING after NATS came back",
      },
    );
  }, 60_000);
});
