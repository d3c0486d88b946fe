/** A WebSocket test client (the `ws` package): collects JSON frames and waits for them. */

import type { Json } from "@trellis/gateway/testing";
import { VERSION } from "@trellis/gateway/testing";
import WebSocket from "ws";

export interface WsClient {
  socket: WebSocket;
  /** Every JSON frame received so far, in order. */
  frames: Json[];
  /** Frames not read by an earlier call, up to and including the first one `stop` accepts. */
  until(stop: (frame: Json) => boolean, timeoutMs?: number): Promise<Json[]>;
  /**
   * The first frame `match` accepts among all frames, received so far or later.
   * For events a command causes: they may arrive before the command's result.
   */
  waitFor(match: (frame: Json) => boolean, timeoutMs?: number): Promise<Json>;
  send(frame: unknown): void;
  close(): Promise<void>;
  closed: Promise<{ code: number; reason: string }>;
}

/** Open a socket; resolves once open (rejects with the HTTP status when refused). */
export function openWs(
  url: string,
  key: string | null,
  headers: Record<string, string> = {},
  protocols?: string[],
): Promise<WsClient> {
  const options = {
    headers: {
      // A browser (offering subprotocols here) sends no custom headers.
      ...(protocols ? {} : { "harn-agents-protocol-version": VERSION }),
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...headers,
    },
  };
  const target = url.replace(/^http/, "ws");
  const socket = protocols
    ? new WebSocket(target, protocols, options)
    : new WebSocket(target, options);
  const frames: Json[] = [];
  let read = 0;
  const waiters = new Set<() => void>();
  socket.on("message", (data) => {
    frames.push(JSON.parse(String(data)));
    for (const wake of waiters) wake();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.on("close", (code, reason) => {
      resolve({ code, reason: String(reason) });
      for (const wake of waiters) wake();
    }),
  );
  /**
   * What `found` returns once it returns something, asked now and at every
   * frame; rejects when the socket closes first or after `timeoutMs`.
   */
  const waitUntil = <T>(
    found: () => T | undefined,
    closedMessage: () => string,
    timeoutMs: number,
  ): Promise<T> => {
    // Made here, called from the test, so a timeout's stack names the test line that waited.
    const timeout = new Error("timed out");
    return new Promise((resolve, reject) => {
      const check = () => {
        const value = found();
        if (value !== undefined) {
          waiters.delete(check);
          clearTimeout(timer);
          resolve(value);
          return;
        }
        if (socket.readyState === WebSocket.CLOSED) {
          waiters.delete(check);
          clearTimeout(timer);
          reject(new Error(closedMessage()));
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        const recent = frames.filter((f) => f.type !== "heartbeat").slice(-8);
        timeout.message = `timed out after ${timeoutMs} ms; last frames but heartbeats: ${JSON.stringify(recent)}`;
        reject(timeout);
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  };
  const client: WsClient = {
    socket,
    frames,
    closed,
    send: (frame) => socket.send(typeof frame === "string" ? frame : JSON.stringify(frame)),
    until(stop, timeoutMs = 15_000) {
      const start = read;
      return waitUntil(
        () => {
          while (read < frames.length) {
            if (stop(frames[read++])) return frames.slice(start, read);
          }
          return undefined;
        },
        () => `socket closed while waiting; last frames: ${JSON.stringify(frames.slice(-3))}`,
        timeoutMs,
      );
    },
    waitFor(match, timeoutMs = 15_000) {
      let checked = 0;
      return waitUntil(
        () => {
          for (; checked < frames.length; checked++) {
            if (match(frames[checked])) return frames[checked];
          }
          return undefined;
        },
        () => "socket closed while waiting",
        timeoutMs,
      );
    },
    async close() {
      if (socket.readyState === WebSocket.OPEN) socket.close(1000);
      await closed;
    },
  };
  return new Promise((resolve, reject) => {
    socket.once("open", () => resolve(client));
    socket.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c: Buffer) => {
        body += String(c);
      });
      res.on("end", () => {
        const error = new Error(`refused with ${res.statusCode}`) as Error & {
          status?: number;
          body?: Json;
        };
        error.status = res.statusCode;
        try {
          error.body = JSON.parse(body);
        } catch {
          error.body = body;
        }
        reject(error);
      });
    });
    socket.once("error", (error) => reject(error));
  });
}

/** The HTTP refusal of an upgrade (status and error envelope). */
export async function refusedUpgrade(
  url: string,
  key: string | null,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Json }> {
  try {
    const client = await openWs(url, key, headers);
    await client.close();
  } catch (error) {
    const e = error as { status?: number; body?: Json };
    if (e.status !== undefined) return { status: e.status, body: e.body };
    throw error;
  }
  throw new Error("the upgrade was accepted");
}
