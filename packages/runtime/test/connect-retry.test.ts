// A unary call to a service that is not listening yet is sent again until
// the service comes up (nothing was delivered, so it cannot run twice);
// streaming calls and calls with the retry turned off fail at once.
import { createServer } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { health } from "@trellis/contracts/grpc";
import { afterEach, describe, expect, it } from "vitest";
import { createServiceClient } from "../src/client.js";
import { isConnectionRefused } from "../src/connect-retry.js";
import { createService, type TrellisService } from "../src/server.js";
import { captureLogger, testHealthImpl } from "./support.js";

/** A port nothing listens on (bound, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return address.port;
}

describe("unary calls while the connection is refused", () => {
  const started: TrellisService[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close({ graceMs: 100 })));
  });

  async function startOn(port: number, onCall: () => void): Promise<void> {
    const service = createService({
      name: "late",
      logger: captureLogger("late").logger,
      routes: (router) => router.service(health.Health, testHealthImpl(onCall)),
    });
    started.push(service);
    await service.listen({ host: "127.0.0.1", port });
  }

  it("are sent again until the service comes up, and run once", async () => {
    const port = await freePort();
    const client = createServiceClient(health.Health, `http://127.0.0.1:${port}`, {
      connectRetryMs: 20_000,
    });
    let calls = 0;
    let refusedBeforeStart = false;
    const answer = client.check({ service: "" });
    // Start the service only after a first attempt has certainly been refused.
    const probe = createServiceClient(health.Health, `http://127.0.0.1:${port}`, {
      connectRetryMs: 0,
    });
    await probe.check({ service: "" }).catch((error: unknown) => {
      refusedBeforeStart = isConnectionRefused(error);
    });
    expect(refusedBeforeStart).toBe(true);
    await startOn(port, () => {
      calls += 1;
    });
    expect((await answer).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    expect(calls).toBe(1);
  });

  it("fail with Unavailable once the budget is spent", async () => {
    const port = await freePort();
    const client = createServiceClient(health.Health, `http://127.0.0.1:${port}`, {
      connectRetryMs: 200,
    });
    const error = await client.check({ service: "" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unavailable);
    expect(isConnectionRefused(error)).toBe(true);
  });

  it("are not retried when the call's signal is aborted", async () => {
    const port = await freePort();
    const client = createServiceClient(health.Health, `http://127.0.0.1:${port}`, {
      connectRetryMs: 600_000,
    });
    const controller = new AbortController();
    const call = client.check({ service: "" }, { signal: controller.signal }).catch((e) => e);
    controller.abort();
    const error = await call;
    expect(error).toBeInstanceOf(ConnectError);
  });

  it("never re-send a streaming call", async () => {
    const port = await freePort();
    // With a 10-minute budget a retried stream would outlive the test.
    const client = createServiceClient(health.Health, `http://127.0.0.1:${port}`, {
      connectRetryMs: 600_000,
    });
    const error = await (async () => {
      for await (const _ of client.watch({ service: "" })) return undefined;
      return undefined;
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectError);
    expect(isConnectionRefused(error)).toBe(true);
  });

  it("leave other errors alone", () => {
    expect(isConnectionRefused(new ConnectError("reset", Code.Unavailable))).toBe(false);
    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    expect(
      isConnectionRefused(new ConnectError("x", Code.Internal, undefined, undefined, refused)),
    ).toBe(false);
    expect(
      isConnectionRefused(new ConnectError("x", Code.Unavailable, undefined, undefined, refused)),
    ).toBe(true);
    expect(
      isConnectionRefused(
        new ConnectError(
          "x",
          Code.Unavailable,
          undefined,
          undefined,
          new AggregateError([refused]),
        ),
      ),
    ).toBe(true);
  });
});

describe("TRELLIS_CONNECT_RETRY_MS", () => {
  const saved = process.env.TRELLIS_CONNECT_RETRY_MS;
  afterEach(() => {
    if (saved === undefined) delete process.env.TRELLIS_CONNECT_RETRY_MS;
    else process.env.TRELLIS_CONNECT_RETRY_MS = saved;
  });

  it.each(["soon", "-1", "Infinity"])(
    "refuses %j when a client is built, naming the variable",
    (raw) => {
      process.env.TRELLIS_CONNECT_RETRY_MS = raw;
      expect(() => createServiceClient(health.Health, "http://127.0.0.1:1")).toThrow(
        new RegExp(`TRELLIS_CONNECT_RETRY_MS must be a number of milliseconds ≥ 0, got "${raw}"`),
      );
    },
  );

  it("takes 0 (off) and an empty value (the default)", () => {
    for (const raw of ["0", ""]) {
      process.env.TRELLIS_CONNECT_RETRY_MS = raw;
      expect(createServiceClient(health.Health, "http://127.0.0.1:1")).toBeDefined();
    }
  });
});
