// Embedded mode (`trellis dev`, what `npm start` runs) traces like every
// distributed process: configured only by the standard OTEL_* variables, it
// exports one trace per chat turn — the Send, the internal SubmitTask, the
// turn, its routing and the backend run — as service "trellis".
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService } from "@trellis/contracts/chat";
import { Role } from "@trellis/contracts/core";
import { AgentService } from "@trellis/contracts/tasks";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTrellisDev, type TrellisDev } from "../support/trellis-dev.js";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  SpanKind,
  startOtlpReceiver,
} from "./otlp-receiver.js";

const apiKey = "trellis-embedded-trace-key-0123456789";
const bearer: Interceptor = (next) => (req) => {
  req.header.set("authorization", `Bearer ${apiKey}`);
  return next(req);
};

const { SERVER, CLIENT } = SpanKind;

describe("a chat turn's trace, embedded mode", () => {
  let receiver: OtlpReceiver;
  let trellis: TrellisDev;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    trellis = await startTrellisDev({
      TRELLIS_API_KEY: apiKey,
      TRELLIS_LOG_LEVEL: "warn",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: "100",
    });
  }, 90_000);

  afterAll(async () => {
    await trellis?.stop();
    await receiver?.close();
  });

  it("exports one tree per turn, from the Send down to the backend run", async () => {
    const transport = createGrpcTransport({ baseUrl: trellis.url, interceptors: [bearer] });
    const { agent } = await createClient(AgentService, transport).createAgent({
      agent: {
        workspaceId: "default",
        name: "traced-embedded",
        backend: "scripted",
        definition: {
          entry: "reply",
          nodes: { reply: { update: { messages: [{ role: "assistant", content: "traced" }] } } },
        },
      },
    });
    const sessionId = "ses_traced_embedded";
    const { outcome } = await createClient(ChatService, transport).send({
      sessionId,
      agentId: agent?.id ?? "",
      message: { role: Role.USER, parts: [{ kind: { case: "text", value: { text: "hi" } } }] },
    });
    expect(outcome?.kind.case).toBe("completed");

    const has = (name: string, kind?: number) => (s: ReceivedSpan) =>
      s.name === name && (kind === undefined || s.kind === kind);
    const hops = [
      has("trellis.chat.v1.ChatService/Send", SERVER),
      has("trellis.tasks.v1.TaskService/SubmitTask", CLIENT),
      has("trellis.tasks.v1.TaskService/SubmitTask", SERVER),
      has("trellis.turn"),
      has("trellis.route"),
      has("trellis.adapter.run"),
    ];
    const turn = await eventually(
      () =>
        receiver.spans.find(
          (s) => s.name === "trellis.turn" && s.attributes["trellis.session_id"] === sessionId,
        ),
      { timeoutMs: 15_000, what: "the turn's span" },
    );
    const inTrace = () => receiver.spans.filter((s) => s.traceId === turn.traceId);
    await eventually(() => hops.every((hop) => inTrace().some(hop)), {
      timeoutMs: 15_000,
      what: "every hop's span in the turn's trace",
    }).catch((error: unknown) => {
      const seen = receiver.spans.map(
        (s) => `${s.traceId.slice(0, 8)} ${s.kind} ${s.name} ${s.spanId}<-${s.parentSpanId}`,
      );
      throw new Error(`${String(error)}\n${seen.join("\n")}`);
    });
    const spans = inTrace();
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    // One tree: the Send's server span is the root, every other span's parent is in the trace.
    const roots = spans.filter((s) => s.parentSpanId === "");
    expect(roots.map((s) => [s.name, s.kind])).toEqual([
      ["trellis.chat.v1.ChatService/Send", SERVER],
    ]);
    for (const span of spans) {
      if (span.parentSpanId !== "") {
        expect(byId.has(span.parentSpanId), `${span.name} has its parent`).toBe(true);
      }
    }
    // Each hop descends from the one before.
    let previous = roots[0] as ReceivedSpan;
    for (const hop of hops.slice(1)) {
      const span = spans.find(hop) as ReceivedSpan;
      const ancestors: ReceivedSpan[] = [];
      for (let p = byId.get(span.parentSpanId); p; p = byId.get(p.parentSpanId)) ancestors.push(p);
      expect(ancestors, `${span.name} under ${previous.name}`).toContain(previous);
      previous = span;
    }
    // One process, one service name.
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(["trellis"]));
    expect(receiver.rejected).toEqual([]);
  }, 60_000);
});
