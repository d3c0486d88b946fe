import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { health } from "@trellis/contracts/grpc";
import { describe, expect, it } from "vitest";
import { createService } from "../src/server.js";
import { onShutdownSignals } from "../src/signals.js";
import { captureLogger, sleep, testHealthImpl } from "./support.js";

const { SERVING } = health.HealthCheckResponse_ServingStatus;

function startService() {
  const calls: string[] = [];
  const { logger, lines } = captureLogger("shutdown");
  const service = createService({
    name: "shutdown",
    logger,
    routes: (router) =>
      router.service(
        health.Health,
        testHealthImpl((req) => calls.push(req.service)),
      ),
  });
  return { service, calls, lines };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await sleep(5);
  if (!check()) throw new Error("condition not reached");
}

describe("graceful shutdown", () => {
  it("drains in-flight calls on HTTP/2 and HTTP/1.1, then runs closers in reverse order", async () => {
    const { service, calls } = startService();
    const order: string[] = [];
    service.onClose(() => {
      order.push("nats");
    }, "nats");
    service.onClose(async () => {
      await sleep(5);
      order.push("postgres");
    }, "postgres");
    const { url } = await service.listen({ host: "127.0.0.1" });

    const grpc = createClient(health.Health, createGrpcTransport({ baseUrl: url }));
    const h2Call = grpc.check({ service: "slow:300" });
    const h1Call = fetch(`${url}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ service: "slow:300" }),
    });
    await until(() => calls.length === 2);

    const started = Date.now();
    let closed = false;
    const closing = service.close({ graceMs: 5000 }).then(() => {
      closed = true;
    });
    expect(service.closing.aborted).toBe(true);
    expect(service.health.status()).toBe("NOT_SERVING");

    // New connections are refused while the old ones drain.
    await sleep(20);
    const refused = await fetch(`${url}/grpc.health.v1.Health/Check`, { method: "POST" }).then(
      () => false,
      () => true,
    );
    expect(refused).toBe(true);

    expect((await h2Call).status).toBe(SERVING);
    const h1 = await h1Call;
    expect(h1.status).toBe(200);
    expect(await h1.json()).toEqual({ status: "SERVING" });
    expect(closed).toBe(false);

    await closing;
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(order).toEqual(["postgres", "nats"]);
    // Idempotent.
    await service.close();
  });

  it("cancels what is still running when the grace period ends", async () => {
    const { service, calls, lines } = startService();
    const { url } = await service.listen({ host: "127.0.0.1" });
    const grpc = createClient(health.Health, createGrpcTransport({ baseUrl: url }));
    const call = grpc.check({ service: "slow:30000" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    await until(() => calls.length === 1);

    const started = Date.now();
    await service.close({ graceMs: 100 });
    expect(Date.now() - started).toBeLessThan(2000);
    const error = await call;
    // The handler honoured its signal, so the client sees why: the server is going away.
    expect(error?.code).toBe(Code.Unavailable);
    expect(
      lines.some((l) => l.msg === "shutdown grace period over; cancelling in-flight calls"),
    ).toBe(true);
  });

  it("logs a failing closer and still runs the others", async () => {
    const { service, lines } = startService();
    const ran: string[] = [];
    service.onClose(() => ran.push("first"), "first");
    service.onClose(() => {
      throw new Error("already closed");
    }, "broken");
    await service.listen({ host: "127.0.0.1" });
    await service.close({ graceMs: 100 });
    expect(ran).toEqual(["first"]);
    expect(lines.find((l) => l.msg === "closer failed during shutdown")).toMatchObject({
      closer: "broken",
      error: { message: "already closed" },
    });
  });

  it("goes on past a closer that never finishes, after its bound, and names it", async () => {
    const { service, lines } = startService();
    const ran: string[] = [];
    service.onClose(() => ran.push("first"), "first");
    service.onClose(() => new Promise<void>(() => {}), "stuck");
    await service.listen({ host: "127.0.0.1" });
    const started = Date.now();
    await service.close({ graceMs: 100, closerTimeoutMs: 200 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(ran).toEqual(["first"]);
    expect(
      lines.find((l) => l.msg === "closer did not finish during shutdown; going on without it"),
    ).toMatchObject({ closer: "stuck", bound_ms: 200 });
  });
});

describe("onShutdownSignals", () => {
  it("runs the shutdown once per process, on the first signal", async () => {
    const seen: string[] = [];
    const listenersBefore = process.listenerCount("SIGUSR2");
    // SIGUSR2 stands in for SIGTERM: emitting it only calls listeners, nothing is sent.
    const off = onShutdownSignals((signal) => seen.push(signal), {
      signals: ["SIGUSR2"],
      exit: false,
    });
    try {
      process.emit("SIGUSR2", "SIGUSR2");
      process.emit("SIGUSR2", "SIGUSR2");
      await sleep(5);
      expect(seen).toEqual(["SIGUSR2"]);
    } finally {
      off();
    }
    expect(process.listenerCount("SIGUSR2")).toBe(listenersBefore);
  });
});
