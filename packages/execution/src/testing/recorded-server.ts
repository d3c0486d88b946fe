/**
 * A local HTTP server (node:http) that replays recorded provider responses.
 *
 * Recorded responses live in `packages/execution/test/fixtures/<provider>/*.http`:
 * each file is a raw HTTP/1.1 response exactly as the provider sends it —
 * status line, headers, blank line, body (JSON, or a `text/event-stream` body
 * of SSE events). The server sends a recorded body in pieces (one SSE event
 * per write, with a pause) so the SDKs really parse a stream incrementally.
 *
 * Tests queue the responses a route should give, in order, then point the
 * real SDK clients at `url`; every request the server received is kept for
 * assertions (method, path, headers, parsed JSON body).
 */
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

const FIXTURES = fileURLToPath(new URL("../../test/fixtures/", import.meta.url));

/** One recorded response. */
export interface RecordedResponse {
  /** The fixture it came from, for messages. */
  name: string;
  status: number;
  statusText: string;
  headers: [string, string][];
  body: string;
  /** Wait this long before answering (to provoke client timeouts). */
  delayMs?: number;
}

/** A request the server received. */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: unknown;
}

/** Reads `fixtures/<name>` (a raw HTTP response). */
export function fixture(name: string, options: { delayMs?: number } = {}): RecordedResponse {
  const text = readFileSync(`${FIXTURES}${name}`, "utf8");
  const split = text.indexOf("\n\n");
  if (split < 0) throw new Error(`${name}: no blank line after the headers`);
  const [statusLine = "", ...headerLines] = text.slice(0, split).split("\n");
  const match = /^HTTP\/1\.1 (\d{3}) (.*)$/.exec(statusLine);
  if (!match) throw new Error(`${name}: bad status line ${JSON.stringify(statusLine)}`);
  const headers = headerLines.map((line): [string, string] => {
    const colon = line.indexOf(":");
    return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
  });
  return {
    name,
    status: Number(match[1]),
    statusText: match[2] ?? "",
    // Framing is the server's business: it sets its own length / chunking.
    headers: headers.filter(([key]) => key !== "content-length" && key !== "transfer-encoding"),
    body: text.slice(split + 2),
    ...(options.delayMs !== undefined ? { delayMs: options.delayMs } : {}),
  };
}

/** The running replay server. */
export interface RecordedServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Queue responses for `path` (e.g. `/v1/chat/completions`), served in order. */
  enqueue(path: string, ...responses: RecordedResponse[]): void;
  /** Every request received, in order. */
  requests: ReceivedRequest[];
  /** Responses still queued, per path (a test that leaves some did not make the calls it meant). */
  pending(): Record<string, string[]>;
  close(): Promise<void>;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

async function send(res: ServerResponse, response: RecordedResponse): Promise<void> {
  if (response.delayMs) {
    await sleep(response.delayMs);
    if (res.destroyed) return;
  }
  const streamed = response.headers.some(
    ([key, value]) => key === "content-type" && value.startsWith("text/event-stream"),
  );
  res.writeHead(response.status, response.statusText, response.headers.flat());
  if (!streamed) {
    res.end(response.body);
    return;
  }
  // One SSE event per write, so the client sees the stream arrive in pieces.
  const events = response.body.split(/(?<=\n\n)/);
  for (const event of events) {
    if (res.destroyed) return;
    res.write(event);
    await sleep(3);
  }
  res.end();
}

/** Starts a replay server on a free loopback port. */
export async function startRecordedServer(): Promise<RecordedServer> {
  const queues = new Map<string, RecordedResponse[]>();
  const requests: ReceivedRequest[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url ?? "/", "http://localhost").pathname;
      const body = await readBody(req);
      requests.push({ method: req.method ?? "", path, headers: req.headers, body });
      const next = queues.get(path)?.shift();
      if (!next) {
        res.writeHead(418, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `no recorded response left for ${path}` } }));
        return;
      }
      await send(res, next);
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(599);
      res.end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    enqueue(path, ...responses) {
      const queue = queues.get(path) ?? [];
      queue.push(...responses);
      queues.set(path, queue);
    },
    pending() {
      const left: Record<string, string[]> = {};
      for (const [path, queue] of queues) {
        if (queue.length > 0) left[path] = queue.map((r) => r.name);
      }
      return left;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The route of the OpenAI Chat Completions API under the server (baseURL `${url}/v1`). */
export const OPENAI_CHAT = "/v1/chat/completions";
/** The route of the Anthropic Messages API under the server (baseURL `url`). */
export const ANTHROPIC_MESSAGES = "/v1/messages";

/** Queues OpenAI Chat Completions responses ({@link OPENAI_CHAT}) read from these fixtures, in order. */
export function enqueueChat(server: Pick<RecordedServer, "enqueue">, ...fixtures: string[]): void {
  server.enqueue(OPENAI_CHAT, ...fixtures.map((name) => fixture(name)));
}
