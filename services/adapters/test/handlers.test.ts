/** The adapters service's handlers in embedded mode, over an in-memory transport. */
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { capabilitiesToProto, eventFromProto, requestToProto } from "@trellis/adapter-sdk";
import { AdapterRegistryService, RoutingService } from "@trellis/contracts/adapters";
import { BackendRegistry, createRoutedExecutor } from "@trellis/execution";
import { capabilities } from "@trellis/execution/testing";
import { chatToMessage, textOf } from "@trellis/messages";
import { errorDetailOf } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { withErrorDetails } from "../src/handlers/errors.js";
import { createRegistryHandlers } from "../src/handlers/registry-handlers.js";
import { createRoutingHandlers } from "../src/handlers/routing-handlers.js";

function embedded() {
  const routed = createRoutedExecutor({ mode: "embedded", env: {} });
  const transport = createRouterTransport((router) => {
    router
      .service(
        AdapterRegistryService,
        withErrorDetails(
          AdapterRegistryService,
          createRegistryHandlers({ registry: routed.registry }),
        ),
      )
      .service(
        RoutingService,
        withErrorDetails(RoutingService, createRoutingHandlers(routed.router)),
      );
  });
  return {
    registry: createClient(AdapterRegistryService, transport),
    routing: createClient(RoutingService, transport),
  };
}

const graph = {
  entry: "reply",
  nodes: { reply: { update: { messages: [{ role: "assistant", content: "hi {{input}}" }] } } },
};

describe("adapters service handlers (embedded)", () => {
  it("lists the in-process scripted backend with its capabilities", async () => {
    const { registry } = embedded();
    const { backends } = await registry.listBackends({});
    expect(backends.map((b) => [b.backendId, b.inProcess, b.workers.length])).toEqual([
      ["scripted", true, 0],
    ]);
  });

  it("refuses remote workers with FailedPrecondition: embedded mode has no work queue", async () => {
    const { registry } = embedded();
    const error = await registry
      .registerBackend({
        worker: {
          workerId: "w1",
          backendId: "remote",
          capabilities: capabilitiesToProto(capabilities()),
          capacity: 1,
          heartbeatIntervalMs: 1000,
        },
      })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(error?.code).toBe(Code.FailedPrecondition);
    expect(error && errorDetailOf(error)?.reason).toBe("remote_workers_unavailable");
  });

  it("undoes a registration the mesh could not hear of (no half-applied worker)", async () => {
    const registry = new BackendRegistry();
    const handlers = createRegistryHandlers({
      registry,
      publish() {
        throw new Error("nats: max_payload exceeded");
      },
    });
    const transport = createRouterTransport((router) =>
      router.service(AdapterRegistryService, withErrorDetails(AdapterRegistryService, handlers)),
    );
    const client = createClient(AdapterRegistryService, transport);
    const worker = {
      workerId: "w1",
      backendId: "remote",
      capabilities: capabilitiesToProto(capabilities()),
      capacity: 1,
      heartbeatIntervalMs: 1000,
    };
    await expect(client.registerBackend({ worker })).rejects.toThrow();
    expect(registry.worker("w1")).toBeUndefined();
    const { backends } = await client.listBackends({});
    expect(backends.map((b) => b.backendId)).not.toContain("remote");
  });

  it("executes through routing as a stream: routed, the message, one turn_finished", async () => {
    const { routing } = embedded();
    const request = requestToProto({
      taskId: "tsk_h1",
      sessionId: "ses_h",
      workspaceId: "ws_h",
      agent: { id: "agt_h", backend: "scripted", definition: graph, tools: [] },
      history: [],
      input: chatToMessage({ role: "user", content: "there" }),
      signal: new AbortController().signal,
    });
    const events = [];
    for await (const response of routing.execute({ request })) {
      if (response.event) events.push(eventFromProto(response.event));
    }
    expect(events.map((e) => e.kind)).toEqual(["routed", "message", "turn_finished"]);
    const last = events.at(-1);
    expect(last?.kind === "turn_finished" && textOf(last.result.messages[0]!)).toBe("hi there");
  });

  it("answers an invalid agent definition with InvalidArgument naming the field", async () => {
    const { routing } = embedded();
    const request = requestToProto({
      taskId: "tsk_h2",
      sessionId: "ses_h",
      workspaceId: "ws_h",
      agent: {
        id: "agt_h",
        backend: "scripted",
        definition: { ...graph, routing: { prefer: "free" } },
        tools: [],
      },
      history: [],
      input: chatToMessage({ role: "user", content: "x" }),
      signal: new AbortController().signal,
    });
    const error = await routing.negotiate({ request }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(error?.code).toBe(Code.InvalidArgument);
    expect(error && errorDetailOf(error)?.param).toBe("agent.definition.routing.prefer");
  });
});
