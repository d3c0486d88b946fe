/**
 * `trellis adapters conformance --backend ID`: the BYOH Appendix B checklist
 * against a live, registered backend, through the public API of a running
 * Trellis (the gateway; the admin key). A backend author runs it before
 * shipping. Each item prints pass / fail / skip with why; exit 0 when none
 * failed, 1 when one did, 2 on a usage or connection error.
 *
 * What it checks (packages/execution/src/conformance has the in-repo suite for
 * in-process adapters; this one sees only what a client sees):
 *   registered        ListBackends lists it, with valid capabilities
 *   blocks            negotiation blocks each capability it declares absent
 *   degrades          negotiation warns (degraded) when it gives less trace than asked
 *   pure              negotiating twice gives the same answer
 *   completes         a simple turn completes with answer text
 *   streams           progress before the one outcome iff it declares native streaming
 *   refuses           a turn requiring what it lacks ends `unsupported`, never faked
 *   timeout           requirements.max_elapsed_ms ends a slow turn `timeout` (--slow-input)
 *   cancel            canceling a running turn ends it, not completed (--slow-input)
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { create, type JsonObject, toJsonString } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  capabilitiesFromProto,
  capabilityProblems,
  type ExecutionCapabilities,
} from "@trellis/adapter-sdk";
import {
  AdapterRegistryService,
  ExecutionRequestSchema,
  NegotiateResponseSchema,
  ReasonCode,
  Requirement,
  RoutingService,
  Severity,
  TraceDepth,
} from "@trellis/contracts/adapters";
import { ChatService, type ChatTurnOutcome } from "@trellis/contracts/chat";
import { MessageSchema, Role } from "@trellis/contracts/core";
import { AgentService, TaskService } from "@trellis/contracts/tasks";
import { type ClientsOf, createClients } from "@trellis/runtime";
import { parseCommand, UsageError } from "./args.js";
import { adaptersUsage } from "./usage.js";

/** Where the command writes (tests capture it). */
export interface AdaptersIo {
  out(text: string): void;
  err(text: string): void;
}

const processIo: AdaptersIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

const options = {
  backend: { type: "string" },
  url: { type: "string" },
  "api-key": { type: "string" },
  input: { type: "string" },
  "slow-input": { type: "string" },
  definition: { type: "string" },
  json: { type: "boolean" },
} as const;

/** One checklist item's verdict. */
export interface ConformanceItem {
  item: string;
  status: "pass" | "fail" | "skip";
  detail: string;
}

/** The services the conformance run calls, through the gateway. */
const CONFORMANCE_SERVICES = {
  registry: AdapterRegistryService,
  routing: RoutingService,
  agents: AgentService,
  chat: ChatService,
  tasks: TaskService,
};

type Clients = ClientsOf<typeof CONFORMANCE_SERVICES>;

/** A capability a backend may lack: how to require it, in proto and in an agent's routing. */
const lackable: ReadonlyArray<{
  name: string;
  lacks(c: ExecutionCapabilities): boolean;
  field:
    | "toolUse"
    | "structuredToolCalls"
    | "continuationSupport"
    | "approvalInterrupts"
    | "attachments";
  key: string;
  code: ReasonCode;
}> = [
  {
    name: "tool use",
    lacks: (c) => c.toolUse === "none",
    field: "toolUse",
    key: "tool_use",
    code: ReasonCode.TOOL_USE_UNSUPPORTED,
  },
  {
    name: "structured tool calls",
    lacks: (c) => !c.structuredToolCalls,
    field: "structuredToolCalls",
    key: "structured_tool_calls",
    code: ReasonCode.STRUCTURED_TOOL_CALLS_UNSUPPORTED,
  },
  {
    name: "continuation",
    lacks: (c) => c.continuationSupport === "none",
    field: "continuationSupport",
    key: "continuation_support",
    code: ReasonCode.CONTINUATION_UNSUPPORTED,
  },
  {
    name: "approval interrupts",
    lacks: (c) => c.approvalInterrupts === "none",
    field: "approvalInterrupts",
    key: "approval_interrupts",
    code: ReasonCode.APPROVAL_INTERRUPT_UNSUPPORTED,
  },
  {
    name: "attachments",
    lacks: (c) => !c.attachments,
    field: "attachments",
    key: "attachments",
    code: ReasonCode.ATTACHMENTS_UNSUPPORTED,
  },
];

const text = (value: string) =>
  create(MessageSchema, {
    role: Role.USER,
    parts: [{ kind: { case: "text", value: { text: value } } }],
  });

const textOfParts = (message: { parts: Array<{ kind: { case?: string; value?: unknown } }> }) =>
  message.parts
    .map((p) => (p.kind.case === "text" ? (p.kind.value as { text: string }).text : ""))
    .join("");

function describeOutcome(outcome: ChatTurnOutcome | undefined): string {
  const kind = outcome?.kind;
  if (!kind?.case) return "no outcome";
  if (kind.case === "errored")
    return `errored (${kind.value.errorCategory}: ${kind.value.diagnostic})`;
  return kind.case;
}

/** Run the checklist; never throws for a backend's misbehaviour (that is a `fail`). */
export async function runConformance(
  clients: Clients,
  backendId: string,
  settings: { input: string; slowInput?: string; definition: JsonObject },
): Promise<ConformanceItem[]> {
  const items: ConformanceItem[] = [];
  const record = (item: string, status: ConformanceItem["status"], detail: string) =>
    items.push({ item, status, detail });
  const attempt = async (item: string, check: () => Promise<void>) => {
    try {
      await check();
    } catch (error) {
      record(item, "fail", error instanceof Error ? error.message : String(error));
    }
  };

  // registered
  const { backends } = await clients.registry.listBackends({});
  const status = backends.find((b) => b.backendId === backendId);
  if (!status) {
    record(
      "registered",
      "fail",
      `no live backend ${backendId} (live: ${backends.map((b) => b.backendId).join(", ") || "none"})`,
    );
    return items;
  }
  let capabilities: ExecutionCapabilities;
  try {
    capabilities = capabilitiesFromProto(status.capabilities, "capabilities");
  } catch (error) {
    record("registered", "fail", `its capabilities cannot be read: ${String(error)}`);
    return items;
  }
  const problems = capabilityProblems(capabilities);
  if (problems.length) {
    record("registered", "fail", problems.map((p) => `${p.field} ${p.message}`).join("; "));
    return items;
  }
  record(
    "registered",
    "pass",
    `${status.inProcess ? "in process" : `${status.workers.length} live worker(s)`}; tool use ${capabilities.toolUse}, streaming ${capabilities.streaming}, continuation ${capabilities.continuationSupport}, approvals ${capabilities.approvalInterrupts}, attachments ${capabilities.attachments}, trace ${capabilities.traceDepth}`,
  );

  const negotiate = async (requirements: Record<string, unknown>) => {
    const response = await clients.routing.negotiate({
      request: create(ExecutionRequestSchema, {
        schemaVersion: 1,
        correlation: { turnId: "conformance", agentId: "conformance", workspaceId: "conformance" },
        agent: { backend: backendId },
        input: text(settings.input),
        requirements,
      }),
    });
    const candidate = response.decision?.candidates.find((c) => c.backendId === backendId);
    return { response, negotiation: candidate?.negotiation };
  };

  // blocks
  await attempt("blocks", async () => {
    const lacking = lackable.filter((l) => l.lacks(capabilities));
    if (lacking.length === 0) {
      record("blocks", "pass", "declares every capability; nothing to block");
      return;
    }
    const wrong: string[] = [];
    for (const l of lacking) {
      const { negotiation } = await negotiate({ [l.field]: Requirement.REQUIRED });
      const blocking = negotiation?.reasons.find(
        (r) => r.code === l.code && r.severity === Severity.BLOCKING,
      );
      if (!negotiation || negotiation.supported || !blocking) {
        wrong.push(`${l.name} required: not blocked (${negotiation ? "supported" : "no answer"})`);
      }
    }
    if (wrong.length) record("blocks", "fail", wrong.join("; "));
    else record("blocks", "pass", `blocked: ${lacking.map((l) => l.name).join(", ")}`);
  });

  // degrades
  await attempt("degrades", async () => {
    if (capabilities.traceDepth === "detailed") {
      record("degrades", "skip", "keeps a detailed trace; nothing to degrade");
      return;
    }
    const { negotiation } = await negotiate({ traceDepth: TraceDepth.DETAILED });
    const warned = negotiation?.reasons.some(
      (r) => r.code === ReasonCode.TRACE_DEPTH_REDUCED && r.severity === Severity.WARNING,
    );
    if (negotiation?.supported && negotiation.degraded && warned) {
      record(
        "degrades",
        "pass",
        "a detailed trace asked of it: supported, degraded, trace_depth_reduced",
      );
    } else {
      record(
        "degrades",
        "fail",
        "a detailed trace asked of it: not reported as degraded with trace_depth_reduced",
      );
    }
  });

  // pure
  await attempt("pure", async () => {
    const requirements = { traceDepth: TraceDepth.STANDARD };
    const [a, b] = [await negotiate(requirements), await negotiate(requirements)];
    const same =
      toJsonString(NegotiateResponseSchema, a.response) ===
      toJsonString(NegotiateResponseSchema, b.response);
    record("pure", same ? "pass" : "fail", same ? "the same answer twice" : "two answers differ");
  });

  const agent = async (extra: JsonObject = {}) => {
    const definition = { ...settings.definition, ...extra };
    const created = await clients.agents.createAgent({
      agent: { name: `conformance-${backendId}`, backend: backendId, definition },
    });
    return created.agent?.id as string;
  };
  const session = (item: string) =>
    `ses_conformance_${item}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

  // completes
  await attempt("completes", async () => {
    const res = await clients.chat.send({
      sessionId: session("completes"),
      agentId: await agent(),
      message: text(settings.input),
    });
    const kind = res.outcome?.kind;
    const reply = kind?.case === "completed" ? kind.value.replies.map(textOfParts).join("") : "";
    if (kind?.case === "completed" && reply.trim() !== "") {
      record("completes", "pass", `replied ${JSON.stringify(reply.slice(0, 60))}`);
    } else {
      record(
        "completes",
        "fail",
        `a simple turn: ${describeOutcome(res.outcome)}, reply ${JSON.stringify(reply)}`,
      );
    }
  });

  // streams
  await attempt("streams", async () => {
    let chunks = 0;
    let deltas = 0;
    let outcomes = 0;
    let chunkAfterOutcome = false;
    for await (const res of clients.chat.sendStreaming({
      sessionId: session("streams"),
      agentId: await agent(),
      message: text(settings.input),
    })) {
      if (res.kind.case === "chunk") {
        chunks++;
        // Native streaming is deltas as they come; a whole message is what
        // any backend's result turns into.
        if (res.kind.value.kind.case === "textDelta") deltas++;
        if (outcomes) chunkAfterOutcome = true;
      } else if (res.kind.case === "outcome") outcomes++;
    }
    const native = capabilities.streaming === "native";
    if (outcomes !== 1 || chunkAfterOutcome) {
      record(
        "streams",
        "fail",
        `${outcomes} outcome(s)${chunkAfterOutcome ? ", progress after the outcome" : ""}; exactly one, last, is required`,
      );
    } else if (native && deltas === 0) {
      record(
        "streams",
        "fail",
        "declares native streaming but sent no text deltas before the outcome (only the final message)",
      );
    } else {
      record(
        "streams",
        "pass",
        `${chunks} progress chunk(s) (${deltas} text deltas), then one outcome${native ? "" : ` (declares streaming ${capabilities.streaming})`}`,
      );
    }
  });

  // refuses
  await attempt("refuses", async () => {
    const missing = lackable.find((l) => l.lacks(capabilities));
    if (!missing) {
      record("refuses", "skip", "declares every capability; nothing to refuse");
      return;
    }
    const res = await clients.chat.send({
      sessionId: session("refuses"),
      agentId: await agent({
        routing: { pinned: backendId, requirements: { [missing.key]: "required" } },
      }),
      message: text(settings.input),
    });
    const kind = res.outcome?.kind;
    if (kind?.case === "errored" && kind.value.errorCategory === "unsupported") {
      record("refuses", "pass", `a turn requiring ${missing.name}: unsupported`);
    } else {
      record(
        "refuses",
        "fail",
        `a turn requiring ${missing.name}: ${describeOutcome(res.outcome)} (expected unsupported)`,
      );
    }
  });

  // timeout and cancel need a turn that takes a while.
  const slow = settings.slowInput;
  if (!slow) {
    record("timeout", "skip", "no --slow-input (a message the backend takes over 3 s to answer)");
    record("cancel", "skip", "no --slow-input");
    return items;
  }
  await attempt("timeout", async () => {
    const started = Date.now();
    const res = await clients.chat.send({
      sessionId: session("timeout"),
      agentId: await agent({
        routing: { pinned: backendId, requirements: { max_elapsed_ms: 1000 } },
      }),
      message: text(slow),
    });
    const elapsed = Date.now() - started;
    const kind = res.outcome?.kind;
    if (kind?.case === "errored" && kind.value.errorCategory === "timeout" && elapsed < 10_000) {
      record("timeout", "pass", `max_elapsed_ms 1000: timeout after ${elapsed} ms`);
    } else {
      record(
        "timeout",
        "fail",
        `max_elapsed_ms 1000: ${describeOutcome(res.outcome)} after ${elapsed} ms`,
      );
    }
  });
  await attempt("cancel", async () => {
    const sessionId = session("cancel");
    const stream = clients.chat
      .sendStreaming({ sessionId, agentId: await agent(), message: text(slow) })
      [Symbol.asyncIterator]();
    const first = stream.next();
    let taskId: string | undefined;
    for (let i = 0; i < 50 && !taskId; i++) {
      await new Promise((r) => setTimeout(r, 100));
      taskId = (await clients.tasks.listTasks({ sessionId })).tasks[0]?.id;
    }
    if (!taskId) throw new Error("the turn's task never appeared");
    const started = Date.now();
    await clients.tasks.cancelTask({ taskId, reason: "conformance: cancel mid-turn" });
    let outcome: ChatTurnOutcome | undefined;
    for (let next = await first; !next.done; next = await stream.next()) {
      if (next.value.kind.case === "outcome") outcome = next.value.kind.value;
    }
    const elapsed = Date.now() - started;
    if (outcome && outcome.kind.case !== "completed" && elapsed < 10_000) {
      record("cancel", "pass", `ended ${describeOutcome(outcome)} ${elapsed} ms after the cancel`);
    } else {
      record("cancel", "fail", `after the cancel: ${describeOutcome(outcome)} in ${elapsed} ms`);
    }
  });
  return items;
}

function adminKey(env: NodeJS.ProcessEnv): string | undefined {
  if (env.TRELLIS_API_KEY) return env.TRELLIS_API_KEY;
  const file = resolve(env.TRELLIS_DATA_DIR ?? ".trellis", "data", "admin-api-key");
  return existsSync(file) ? readFileSync(file, "utf8").trim() : undefined;
}

/** `trellis adapters …`; returns the exit code. */
export async function runAdapters(
  env: NodeJS.ProcessEnv,
  args: readonly string[],
  io: AdaptersIo = processIo,
): Promise<number> {
  const [sub, ...rest] = args;
  const name = "adapters conformance";
  if (sub !== "conformance") {
    throw new UsageError(
      sub === undefined ? "a subcommand is required" : `unknown subcommand ${JSON.stringify(sub)}`,
      "adapters",
      adaptersUsage,
    );
  }
  const parsed = parseCommand({ name, usage: adaptersUsage, options }, rest);
  if (parsed.help) {
    io.out(adaptersUsage);
    return 0;
  }
  const values = parsed.values;
  const backend = values.backend;
  if (!backend) throw new UsageError("--backend is required", name, adaptersUsage);
  let definition: JsonObject = {};
  if (values.definition) {
    try {
      definition = JSON.parse(values.definition) as JsonObject;
    } catch (error) {
      throw new UsageError(`--definition is not JSON (${String(error)})`, name, adaptersUsage);
    }
  }
  const url = values.url ?? env.TRELLIS_URL ?? `http://127.0.0.1:${env.TRELLIS_PORT ?? 8080}`;
  const key = values["api-key"] ?? adminKey(env);
  if (!key) {
    io.err(
      "trellis adapters conformance: no admin key (--api-key, TRELLIS_API_KEY or the data directory's admin-api-key)\n",
    );
    return 2;
  }
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${key}`);
    return next(req);
  };
  const transport = createGrpcTransport({ baseUrl: url, interceptors: [auth] });
  const clients = createClients(transport, CONFORMANCE_SERVICES);
  let items: ConformanceItem[];
  try {
    items = await runConformance(clients, backend, {
      input: values.input ?? "Say hello.",
      ...(values["slow-input"] ? { slowInput: values["slow-input"] } : {}),
      definition,
    });
  } catch (error) {
    io.err(
      `trellis adapters conformance: ${error instanceof Error ? error.message : String(error)} (is Trellis running at ${url}?)\n`,
    );
    return 2;
  }
  const failed = items.filter((i) => i.status === "fail");
  if (values.json) {
    io.out(`${JSON.stringify({ backend, passed: failed.length === 0, items })}\n`);
  } else {
    io.out(`adapter conformance (BYOH Appendix B) of backend ${backend} at ${url}\n`);
    for (const i of items)
      io.out(`  ${i.status.toUpperCase().padEnd(4)}  ${i.item.padEnd(10)}  ${i.detail}\n`);
    io.out(failed.length ? `FAILED: ${failed.map((i) => i.item).join(", ")}\n` : "passed\n");
  }
  return failed.length ? 1 : 0;
}
