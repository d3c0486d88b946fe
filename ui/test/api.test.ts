// The browser's API client against a real HTTP server (no browser, no
// mocks of fetch): headers of every call, the error envelope, list paging,
// and the UI stream's resume with Last-Event-ID after the server drops it.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

// The tab's storage, as the browser has it (api.ts reads the key from it).
const store = new Map<string, string>();
Object.assign(globalThis, {
  sessionStorage: {
    getItem: (k: string) => store.get(k) ?? null,
    setItem: (k: string, v: string) => void store.set(k, v),
    removeItem: (k: string) => void store.delete(k),
  },
});

const {
  ApiError,
  api,
  cancelTask,
  confirmTool,
  listAll,
  openUiStream,
  PROTOCOL_VERSION,
  setApiBase,
  storeKey,
} = await import("../src/api.ts");
const { applyItem, emptyView } = await import("../src/contract.ts");

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

let server: Server;
let seen: Seen[] = [];
let streamConnections = 0;
let handler: (req: IncomingMessage, res: ServerResponse, body: string) => void;

function json(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

function frame(id: string, type: string, payload: Record<string, unknown>): string {
  return `id: ${id}\nevent: ${type}\ndata: ${JSON.stringify({ type, payload })}\n\n`;
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  setApiBase(`http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/`);
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen = [];
  streamConnections = 0;
  store.clear();
  storeKey("key_test");
});

describe("the API client", () => {
  it("sends the key, the protocol version, and an idempotency key on writes", async () => {
    handler = (_req, res) => json(res, 200, { id: "task_1", status: "canceled" });
    await cancelTask("task 1");
    await confirmTool("task_2", false);
    await api("GET", "/v1/sessions?limit=1");
    expect(seen.map((s) => [s.method, s.url])).toEqual([
      ["POST", "/v1/tasks/task%201/cancel"],
      ["POST", "/v1/tasks/task_2/messages"],
      ["GET", "/v1/sessions?limit=1"],
    ]);
    for (const s of seen) {
      expect(s.headers.authorization).toBe("Bearer key_test");
      expect(s.headers["harn-agents-protocol-version"]).toBe(PROTOCOL_VERSION);
    }
    expect(seen[0]!.headers["idempotency-key"]).toMatch(/^ui-[0-9a-f]{32}$/);
    expect(seen[0]!.headers["idempotency-key"]).not.toBe(seen[1]!.headers["idempotency-key"]);
    expect(seen[2]!.headers["idempotency-key"]).toBeUndefined();
    expect(JSON.parse(seen[1]!.body)).toEqual({
      kind: "tool_confirmation",
      message: { role: "user", parts: [{ type: "json", value: { approved: false } }] },
    });
  });

  it("turns the error envelope into a typed ApiError, and a page without one too", async () => {
    handler = (req, res) => {
      if (req.url?.startsWith("/v1/a")) {
        json(res, 400, {
          error: { code: "invalid_request", message: "limit must be…", param: "limit" },
        });
      } else {
        res.writeHead(502);
        res.end("<html>bad gateway</html>");
      }
    };
    const first = await api("GET", "/v1/a").catch((e: unknown) => e);
    expect(first).toBeInstanceOf(ApiError);
    expect(first).toMatchObject({ status: 400, code: "invalid_request", param: "limit" });
    const second = await api("GET", "/v1/b").catch((e: unknown) => e);
    expect(second).toMatchObject({ status: 502, code: "http_502" });
  });

  it("follows list cursors, and stops at its page bound", async () => {
    handler = (req, res) => {
      const url = new URL(req.url ?? "", "http://x");
      const page = Number(url.searchParams.get("cursor") ?? "0");
      json(res, 200, {
        object: "list",
        data: [{ n: page }],
        page: { next_cursor: String(page + 1), has_more: true },
      });
    };
    const all = await listAll<{ n: number }>("/v1/sessions/s/messages", { limit: 1, maxPages: 3 });
    expect(all.map((x) => x.n)).toEqual([0, 1, 2]);
    expect(seen.map((s) => s.url)).toEqual([
      "/v1/sessions/s/messages?limit=1",
      "/v1/sessions/s/messages?limit=1&cursor=1",
      "/v1/sessions/s/messages?limit=1&cursor=2",
    ]);
  });

  it("resumes the UI stream after a drop with Last-Event-ID, applying each envelope once", async () => {
    handler = (req, res) => {
      streamConnections += 1;
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (streamConnections === 1) {
        res.write(frame("evt_1:0", "message", { message_id: "m1", role: "user", text: "hi" }));
        res.write(frame("evt_2:0", "token", { task_id: "t1", text: "Hel" }));
        // The connection drops mid-turn.
        setTimeout(() => res.destroy(), 20);
        return;
      }
      expect(req.headers["last-event-id"]).toBe("evt_2:0");
      res.write(frame("evt_3:0", "response", { message_id: "m2", task_id: "t1", text: "Hello" }));
    };
    let view = emptyView();
    const states: string[] = [];
    const close = openUiStream({
      sessionId: "ses_1",
      tier: "default",
      onItem: (item) => {
        view = applyItem(view, item);
      },
      onFatal: (e) => {
        throw e;
      },
      onState: (s) => states.push(s),
    });
    try {
      await expect.poll(() => view.chat.length, { timeout: 5000 }).toBe(2);
    } finally {
      close();
    }
    expect(view.chat.map((c) => c.text)).toEqual(["hi", "Hello"]);
    expect(view.streaming).toEqual({});
    expect(view.duplicates).toBe(0);
    expect(states).toContain("retrying");
    const streams = seen.filter((s) => s.url.includes("/events/stream"));
    expect(streams[0]!.url).toBe("/v1/ui/sessions/ses_1/events/stream?tier=default");
    expect(streams[0]!.headers["last-event-id"]).toBeUndefined();
    expect(streams[1]!.headers["last-event-id"]).toBe("evt_2:0");
  });

  it("gives up on a stream the server refuses (401), saying why", async () => {
    handler = (_req, res) =>
      json(res, 401, { error: { code: "unauthenticated", message: "bad key" } });
    const fatal = await new Promise<InstanceType<typeof ApiError>>((resolve) => {
      openUiStream({ sessionId: "ses_1", tier: "debug", onItem: () => {}, onFatal: resolve });
    });
    expect(fatal).toMatchObject({ status: 401, code: "unauthenticated" });
    expect(seen).toHaveLength(1);
  });
});
