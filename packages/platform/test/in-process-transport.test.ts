// The in-process transport must behave like the Connect wire for everything a
// handler or a caller can observe: copies, headers, interceptors, errors,
// signals, deadlines — only without the wire's cost.
import { create } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  createClient,
  createContextKey,
  createRouterTransport,
  type HandlerContext,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import { ErrorDetailSchema } from "@trellis/contracts/core";
import { health } from "@trellis/contracts/grpc";
import { describe, expect, it } from "vitest";
import { createInProcessTransport } from "../src/in-process-transport.js";

const { HealthCheckResponseSchema } = health;
const SERVING = health.HealthCheckResponse_ServingStatus.SERVING;
const NOT_SERVING = health.HealthCheckResponse_ServingStatus.NOT_SERVING;

interface Seen {
  contexts: HandlerContext[];
  finished: number;
}

/** A health service whose behaviour each test picks by the requested service name. */
function routes(seen: Seen) {
  const held = create(HealthCheckResponseSchema, { status: SERVING });
  return (router: ConnectRouter) => {
    router.service(health.Health, {
      async check(request, context) {
        seen.contexts.push(context);
        context.responseHeader.set("x-answer", "42");
        context.responseTrailer.set("x-after", "yes");
        switch (request.service) {
          case "held":
            return held;
          case "domain-error":
            throw new ConnectError("nope", Code.FailedPrecondition, { "x-why": "because" }, [
              {
                desc: ErrorDetailSchema,
                value: { reason: "failed_precondition", domain: "test" },
              },
            ]);
          case "crash":
            throw new Error("secret internals");
          case "slow":
            await new Promise((resolve) => setTimeout(resolve, 10_000));
            return { status: SERVING };
          case "echo-header":
            return { status: context.requestHeader.get("x-in") === "in" ? SERVING : NOT_SERVING };
          default:
            request.service = "changed by the handler";
            return { status: SERVING };
        }
      },
      async *watch(request, context) {
        seen.contexts.push(context);
        try {
          if (request.service === "fail-after-one") {
            yield { status: SERVING };
            throw new ConnectError("gone bad", Code.DataLoss);
          }
          for (let i = 0; i < 3; i++) yield { status: i % 2 === 0 ? SERVING : NOT_SERVING };
          if (request.service === "forever") {
            await new Promise<void>((resolve) =>
              context.signal.addEventListener("abort", () => resolve(), { once: true }),
            );
          }
        } finally {
          seen.finished++;
        }
      },
    });
  };
}

function setup(interceptors: { client?: Interceptor[]; server?: Interceptor[] } = {}) {
  const seen: Seen = { contexts: [], finished: 0 };
  const transport = createInProcessTransport({
    routes: routes(seen),
    ...(interceptors.client ? { clientInterceptors: interceptors.client } : {}),
    ...(interceptors.server ? { serverInterceptors: interceptors.server } : {}),
  });
  return { seen, client: createClient(health.Health, transport), transport };
}

async function rejection(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("expected the call to fail");
}

describe("in-process transport", () => {
  it("hands each side its own copy of the messages", async () => {
    const { client } = setup();
    const request = create(health.HealthCheckRequestSchema, { service: "mine" });
    const first = await client.check(request);
    expect(request.service).toBe("mine"); // the handler changed its copy only
    first.status = NOT_SERVING;
    const again = await client.check({ service: "held" });
    again.status = NOT_SERVING;
    expect((await client.check({ service: "held" })).status).toBe(SERVING);
  });

  it("carries request headers in and response headers and trailers out", async () => {
    const { client } = setup();
    let header: Headers | undefined;
    let trailer: Headers | undefined;
    const answer = await client.check(
      { service: "echo-header" },
      {
        headers: { "x-in": "in" },
        onHeader: (h) => {
          header = h;
        },
        onTrailer: (t) => {
          trailer = t;
        },
      },
    );
    expect(answer.status).toBe(SERVING);
    expect(header?.get("x-answer")).toBe("42");
    expect(trailer?.get("x-after")).toBe("yes");
  });

  it("runs client interceptors around the call and server interceptors around the handler, each with its own context values", async () => {
    const order: string[] = [];
    const client: Interceptor = (next) => async (req) => {
      order.push("client in");
      req.header.set("x-signed", "by client");
      req.contextValues.set(marker, "client side");
      const res = await next(req);
      order.push("client out");
      return res;
    };
    const server: Interceptor = (next) => async (req) => {
      order.push(`server in (${req.header.get("x-signed")}, ${req.contextValues.get(marker)})`);
      const res = await next(req);
      order.push("server out");
      return res;
    };
    const { client: c } = setup({ client: [client], server: [server] });
    await c.check({ service: "x" });
    expect(order).toEqual([
      "client in",
      "server in (by client, unset)",
      "server out",
      "client out",
    ]);
  });

  it("delivers errors as the Connect protocol would: code, message, metadata and details; anything else is internal", async () => {
    const { client } = setup();
    const domain = await rejection(client.check({ service: "domain-error" }));
    expect(domain.code).toBe(Code.FailedPrecondition);
    expect(domain.rawMessage).toBe("nope");
    expect(domain.metadata.get("x-why")).toBe("because");
    expect(domain.metadata.get("x-answer")).toBe("42");
    expect(domain.findDetails(ErrorDetailSchema)[0]?.reason).toBe("failed_precondition");
    const crash = await rejection(client.check({ service: "crash" }));
    expect(crash.code).toBe(Code.Internal);
    expect(crash.rawMessage).toBe("internal error");
    expect(crash.message).not.toContain("secret internals");
  });

  it("gives the same errors as Connect's router transport", async () => {
    const seen: Seen = { contexts: [], finished: 0 };
    const wire = createClient(health.Health, createRouterTransport(routes(seen)));
    const { client } = setup();
    for (const service of ["domain-error", "crash"]) {
      const a = await rejection(wire.check({ service }));
      const b = await rejection(client.check({ service }));
      expect({ code: b.code, message: b.rawMessage, details: b.details }).toEqual({
        code: a.code,
        message: a.rawMessage,
        details: a.details,
      });
      expect(b.metadata.get("x-why")).toBe(a.metadata.get("x-why"));
    }
  });

  it("ends the handler's signal when a call ends, whether it answered or failed", async () => {
    const { client, seen } = setup();
    await client.check({ service: "x" });
    await rejection(client.check({ service: "crash" }));
    expect(seen.contexts.map((c) => c.signal.aborted)).toEqual([true, true]);
    // An answered call ends with a Canceled reason (as an AbortError reads).
    expect(ConnectError.from(seen.contexts[0]?.signal.reason).code).toBe(Code.Canceled);
  });

  it("answers a caller whose deadline passed at once, and aborts the handler's signal", async () => {
    const { client, seen } = setup();
    const started = Date.now();
    const late = await rejection(client.check({ service: "slow" }, { timeoutMs: 50 }));
    expect(late.code).toBe(Code.DeadlineExceeded);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(seen.contexts[0]?.signal.aborted).toBe(true);
  });

  it("answers a caller that aborts with canceled", async () => {
    const { client, seen } = setup();
    const abort = new AbortController();
    const call = client.check({ service: "slow" }, { signal: abort.signal });
    await new Promise((resolve) => setTimeout(resolve, 10));
    abort.abort();
    expect((await rejection(call)).code).toBe(Code.Canceled);
    expect(seen.contexts[0]?.signal.aborted).toBe(true);
  });

  it("refuses a method nobody registered as unimplemented", async () => {
    const transport: Transport = createInProcessTransport({ routes: () => {} });
    const error = await rejection(createClient(health.Health, transport).check({}));
    expect(error.code).toBe(Code.Unimplemented);
  });

  it("streams a server stream's messages in order and ends the handler's signal at its end", async () => {
    const { client, seen } = setup();
    const statuses: number[] = [];
    for await (const answer of client.watch({ service: "x" })) statuses.push(answer.status);
    expect(statuses).toEqual([SERVING, NOT_SERVING, SERVING]);
    expect(seen.finished).toBe(1);
    expect(seen.contexts[0]?.signal.aborted).toBe(true);
  });

  it("delivers a stream's error after the messages before it", async () => {
    const { client } = setup();
    const statuses: number[] = [];
    const error = await rejection(
      (async () => {
        for await (const answer of client.watch({ service: "fail-after-one" }))
          statuses.push(answer.status);
      })(),
    );
    expect(statuses).toEqual([SERVING]);
    expect(error.code).toBe(Code.DataLoss);
    expect(error.rawMessage).toBe("gone bad");
  });

  it("aborts a waiting stream handler when its caller aborts, and answers the caller at once", async () => {
    const { client, seen } = setup();
    const abort = new AbortController();
    const statuses: number[] = [];
    const error = await rejection(
      (async () => {
        for await (const answer of client.watch({ service: "forever" }, { signal: abort.signal })) {
          statuses.push(answer.status);
          if (statuses.length === 3) setTimeout(() => abort.abort(), 10);
        }
      })(),
    );
    expect(statuses).toHaveLength(3);
    expect(error.code).toBe(Code.Canceled);
    expect(seen.contexts[0]?.signal.aborted).toBe(true);
  });
});

const marker = createContextKey("unset", { description: "test marker" });
