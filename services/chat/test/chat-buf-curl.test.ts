/**
 * The suspend → Deliver → Subscribe cycle with a stock gRPC client: `buf curl`
 * (server reflection, gRPC over h2c, the admin key as a bearer token) against
 * the whole embedded Trellis, started the way `npm start` starts it. These are
 * the commands of the README's "Chat over buf curl" section.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allServices } from "../../../src/services.js";

// biome-ignore lint/suspicious/noExplicitAny: buf curl's JSON output, checked by the assertions
type Json = Record<string, any>;

const run = promisify(execFile);
const buf = fileURLToPath(new URL("../../../node_modules/.bin/buf", import.meta.url));
const KEY = "trellis-chat-buf-curl-key-0123456789";

let trellis: EmbeddedTrellis;
let url: string;

beforeAll(async () => {
  trellis = await startEmbedded({
    services: allServices,
    port: 0,
    logger: createLogger({ service: "chat-buf-curl", level: "error", write: () => {} }),
    env: { TRELLIS_API_KEY: KEY },
  });
  url = trellis.address.url;
});
afterAll(async () => {
  await trellis?.close({ graceMs: 100 });
});

const flags = [
  "--protocol",
  "grpc",
  "--http2-prior-knowledge",
  "-H",
  `Authorization: Bearer ${KEY}`,
];

/** One unary call with buf curl; its JSON response. */
async function curl(method: string, body: unknown): Promise<Json> {
  const { stdout } = await run(
    buf,
    ["curl", ...flags, "-d", JSON.stringify(body), `${url}/${method}`],
    {
      timeout: 30_000,
    },
  );
  return JSON.parse(stdout);
}

/** The JSON objects buf curl printed for a server stream so far (pretty-printed, one after another). */
function objectsOf(text: string): Json[] {
  const out: Json[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") {
      if (depth++ === 0) start = i;
    } else if (c === "}" && --depth === 0) out.push(JSON.parse(text.slice(start, i + 1)));
  }
  return out;
}

async function until<T>(what: string, check: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const approvalGraph = {
  entry: "ask",
  nodes: {
    ask: { update: { messages: [{ role: "assistant", content: "May I send the email?" }] } },
    wait: { suspend: { signal_id: "approval" } },
    sent: { update: { messages: [{ role: "assistant", content: "Email sent." }] } },
  },
  edges: [
    { from: "ask", to: "wait" },
    { from: "wait", to: "sent" },
    { from: "sent", to: "END" },
  ],
};

describe("chat over buf curl (embedded, like npm start)", () => {
  let subscriber: ChildProcess | undefined;
  afterAll(() => {
    subscriber?.kill("SIGTERM");
  });

  it("Send suspends, Deliver resumes, Subscribe reports exactly one post-resume outcome", async () => {
    const { agent } = await curl("trellis.tasks.v1.AgentService/CreateAgent", {
      agent: { name: "approver", backend: "scripted", definition: approvalGraph },
    });
    expect(agent.id).toBeTruthy();
    const sessionId = `ses_buf_curl_${Date.now().toString(36)}`;

    const sent = await curl("trellis.chat.v1.ChatService/Send", {
      sessionId,
      agentId: agent.id,
      message: { role: "ROLE_USER", parts: [{ text: { text: "email Bob" } }] },
    });
    const paused = sent.outcome?.suspended;
    expect(paused, JSON.stringify(sent)).toBeDefined();
    // The signal id as the graph's author wrote it, and the task-unique one.
    expect(paused.signalDescriptor.signalId).toBe("approval");
    expect(paused.signalDescriptor.globalSignalId).toBe(`${sent.outcome.taskId}:approval`);

    // The listener: buf curl streaming Subscribe's responses to stdout.
    let output = "";
    let errors = "";
    subscriber = spawn(buf, [
      "curl",
      ...flags,
      "-d",
      JSON.stringify({ sessionId }),
      `${url}/trellis.chat.v1.ChatService/Subscribe`,
    ]);
    subscriber.stdout?.on("data", (chunk) => {
      output += chunk;
    });
    subscriber.stderr?.on("data", (chunk) => {
      errors += chunk;
    });
    await until(`subscribed (stderr: ${errors})`, () =>
      objectsOf(output).find((o) => o.subscribed) ? true : undefined,
    );

    // Resumed by what a system outside Trellis knows: the session and the graph's id.
    const delivered = await curl("trellis.tasks.v1.SignalService/Deliver", {
      sessionId,
      signalId: "approval",
      payload: { approved: true },
    });
    expect(delivered.taskId).toBe(sent.outcome.taskId);

    const outcome = await until(
      "the post-resume outcome",
      () => objectsOf(output).find((o) => o.outcome)?.outcome,
    );
    // Nothing more arrives for this one resume.
    await new Promise((r) => setTimeout(r, 500));
    const outcomes = objectsOf(output).filter((o) => o.outcome);
    expect(outcomes).toHaveLength(1);
    expect(outcome.taskId).toBe(sent.outcome.taskId);
    expect(outcome.completed.replies).toHaveLength(1);
    expect(outcome.completed.replies[0]).toMatchObject({
      role: "ROLE_ASSISTANT",
      parts: [{ text: { text: "Email sent." } }],
    });
  });

  it("Send to a new session without agent_id runs the workspace default agent", async () => {
    // The per-agent rate limit must not refuse it for want of the session's agent.
    const sessionId = `ses_buf_curl_default_${Date.now().toString(36)}`;
    const sent = await curl("trellis.chat.v1.ChatService/Send", {
      sessionId,
      message: { role: "ROLE_USER", parts: [{ text: { text: "hello there" } }] },
    });
    expect(sent.outcome?.sessionId).toBe(sessionId);
    const replies = sent.outcome?.completed?.replies;
    expect(replies, JSON.stringify(sent)).toHaveLength(1);
    expect(replies[0]).toMatchObject({
      role: "ROLE_ASSISTANT",
      parts: [{ text: { text: "hello there" } }],
    });
  });
});
