import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { health, reflectionV1alpha } from "@trellis/contracts/grpc";
import { directCallContext } from "@trellis/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { createHealthImpl, HealthMonitor } from "../src/health.js";
import { createService, type TrellisService } from "../src/server.js";
import { captureLogger, sleep } from "./support.js";

const { SERVING, NOT_SERVING, SERVICE_UNKNOWN } = health.HealthCheckResponse_ServingStatus;
// A served "user" service (we add no protos): health registers it by name.
const userService = reflectionV1alpha.ServerReflection.typeName;

/** Waits for the next message of a stream, with a timeout. */
function reader<T>(stream: AsyncIterable<T>) {
  const it = stream[Symbol.asyncIterator]();
  return async (timeoutMs = 5000): Promise<IteratorResult<T>> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        it.next(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error("no message in time")), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  };
}

describe("grpc.health.v1.Health", () => {
  let service: TrellisService | undefined;
  afterEach(async () => {
    await service?.close({ graceMs: 500 });
    service = undefined;
  });

  async function start(probe: () => Promise<void>) {
    const { logger, lines } = captureLogger("health");
    service = createService({
      name: "health",
      logger,
      routes: (router) =>
        router.service(reflectionV1alpha.ServerReflection, {
          async *serverReflectionInfo() {},
        }),
      health: {
        pollIntervalMs: 30,
        dependencies: [{ name: "postgres", check: probe }],
      },
    });
    const { url } = await service.listen({ host: "127.0.0.1" });
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: url }));
    return { client, lines };
  }

  it("reports SERVING overall and per service, and List shows both", async () => {
    const { client } = await start(async () => {});
    expect((await client.check({ service: "" })).status).toBe(SERVING);
    expect((await client.check({ service: userService })).status).toBe(SERVING);
    const list = await client.list({});
    expect(Object.keys(list.statuses).sort()).toEqual(["", userService]);
    expect(list.statuses[""]?.status).toBe(SERVING);
  });

  it("answers NOT_FOUND for Check and SERVICE_UNKNOWN for Watch of an unknown service", async () => {
    const { client } = await start(async () => {});
    const error = await client.check({ service: "no.such.Service" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(error?.code).toBe(Code.NotFound);

    const abort = new AbortController();
    const next = reader(client.watch({ service: "no.such.Service" }, { signal: abort.signal }));
    expect((await next()).value?.status).toBe(SERVICE_UNKNOWN);
    // The stream stays open; it updates once the service becomes known.
    service!.health.setStatus("no.such.Service", "SERVING");
    expect((await next()).value?.status).toBe(SERVING);
    abort.abort();
  });

  it("flips to NOT_SERVING while a dependency probe fails, and Watch sees each change", async () => {
    let failing = false;
    const { client, lines } = await start(async () => {
      if (failing) throw new Error("connection refused");
    });
    const abort = new AbortController();
    const next = reader(client.watch({ service: "" }, { signal: abort.signal }));
    expect((await next()).value?.status).toBe(SERVING);

    failing = true;
    expect((await next()).value?.status).toBe(NOT_SERVING);
    expect((await client.check({ service: "" })).status).toBe(NOT_SERVING);
    expect((await client.check({ service: userService })).status).toBe(NOT_SERVING);
    expect(service!.health.dependencies()).toEqual([
      { name: "postgres", healthy: false, error: "connection refused" },
    ]);

    failing = false;
    expect((await next()).value?.status).toBe(SERVING);
    expect((await client.check({ service: "" })).status).toBe(SERVING);
    abort.abort();

    // One line per transition, not per poll.
    expect(lines.filter((l) => l.msg === "dependency unhealthy")).toHaveLength(1);
    expect(lines.filter((l) => l.msg === "dependency healthy again")).toHaveLength(1);
  });

  it("is NOT_SERVING as soon as listen resolves when a dependency is down at start", async () => {
    const { client } = await start(async () => {
      throw new Error("down");
    });
    expect((await client.check({ service: "" })).status).toBe(NOT_SERVING);
  });

  it("times out a probe that hangs", async () => {
    const { logger } = captureLogger();
    service = createService({
      name: "health",
      logger,
      health: {
        pollIntervalMs: 1000,
        probeTimeoutMs: 50,
        dependencies: [{ name: "nats", check: () => new Promise(() => {}) }],
      },
    });
    await service.listen({ host: "127.0.0.1" });
    expect(service.health.status()).toBe("NOT_SERVING");
    expect(service.health.dependencies()[0]?.error).toBe("probe timed out after 50 ms");
  });

  it("reports NOT_SERVING on shutdown and ends Watch streams so they do not hold up draining", async () => {
    const { client } = await start(async () => {});
    const next = reader(client.watch({ service: "" }));
    expect((await next()).value?.status).toBe(SERVING);
    const closed = service!.close({ graceMs: 5000 });
    expect((await next()).value?.status).toBe(NOT_SERVING);
    expect((await next()).done).toBe(true);
    const started = Date.now();
    await closed;
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

/** A Watch call driven directly, as Connect would, with the client's abort in hand. */
function openWatch(monitor: HealthMonitor) {
  const client = new AbortController();
  const context = directCallContext(health.Health.method.watch, client.signal);
  const watch = createHealthImpl(monitor).watch!;
  const stream = watch(create(health.HealthCheckRequestSchema), context)[Symbol.asyncIterator]();
  return { client, stream };
}

describe("health Watch calls that end while waiting", () => {
  // A healthy server may never change again: a Watch whose client left must
  // not stay with the monitor until the next change.
  it("leave nothing with the monitor, and a live Watch still wakes on a change", async () => {
    const monitor = new HealthMonitor({}, captureLogger().logger);
    const left = Array.from({ length: 10 }, () => openWatch(monitor));
    const live = openWatch(monitor);
    const waits: ReturnType<typeof live.stream.next>[] = [];
    for (const { stream } of [...left, live]) {
      expect((await stream.next()).value?.status).toBe(SERVING);
      waits.push(stream.next());
    }
    await sleep(0);
    expect(monitor.waiting).toBe(11);

    for (const { client } of left) client.abort();
    for (const wait of waits.slice(0, 10)) expect((await wait).done).toBe(true);
    expect(monitor.waiting).toBe(1);

    monitor.setStatus("", "NOT_SERVING");
    expect((await waits[10]!).value?.status).toBe(NOT_SERVING);
    const next = live.stream.next();
    await sleep(0);
    expect(monitor.waiting).toBe(1);
    live.client.abort();
    expect((await next).done).toBe(true);
    expect(monitor.waiting).toBe(0);
  });

  // Measured in a child process with --expose-gc: racing each call's signal
  // against the monitor's long-lived change promise kept ~2.5 kB per call
  // (50 MB here) until a change that never came.
  it("keep no memory per call", async () => {
    const fixture = fileURLToPath(new URL("./fixtures/health-watch-heap.ts", import.meta.url));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--expose-gc", "--import", "tsx", fixture, "20000"],
      { timeout: 60_000 },
    );
    expect(Number(stdout.trim())).toBeLessThan(2_000_000);
  }, 120_000);
});
