// Embedded mode (`trellis dev`, what `npm start` runs) traces like every
// distributed process: configured only by the standard OTEL_* variables, it
// exports one trace per chat turn — the Send, the internal SubmitTask, the
// turn, its routing and the backend run — as service "trellis".
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService } from "@trellis/contracts/chat";
import { Role } from "@trellis/contracts/core";
import { AgentService } from "@trellis/contracts/tasks";
import { bearer } from "@trellis/testkit";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  SpanKind,
  startOtlpReceiver,
} from "@trellis/testkit/otlp-receiver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTrellisDev, type TrellisDev } from "../support/trellis-dev.js";
import { turnTrace } from "./turn-tree.js";

const apiKey = "trellis-embedded-trace-key-0123456789";

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
    const transport = createGrpcTransport({ baseUrl: trellis.url, interceptors: [bearer(apiKey)] });
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
    const spans = await turnTrace(receiver, sessionId, hops);
    // One process, one service name.
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(["trellis"]));
    expect(receiver.rejected).toEqual([]);
  }, 60_000);
});
