/**
 * One HTTP/1.1 request to a bench's server on loopback, over a caller's
 * keep-alive agent (the benches that measure the REST surface under many
 * connections choose their own agents and pools).
 */
import * as http from "node:http";
import { HARN_VERSION } from "./harn-rest.js";

/** A reply: its status, and its body unless the request discarded it. */
export interface Http1Reply {
  status: number;
  body: string;
}

/** Options of {@link http1Request}. */
export interface Http1RequestOptions {
  /** Headers besides `harn-agents-protocol-version` (these win). */
  headers?: Record<string, string>;
  /** The request body (sent with its `content-length`). */
  body?: string;
  /** Read and drop the reply's body (`body` is then ""). */
  discardBody?: boolean;
}

/** `method path` on `127.0.0.1:port` through `agent`, naming the Harn protocol version. */
export function http1Request(
  agent: http.Agent,
  port: number,
  method: string,
  path: string,
  options: Http1RequestOptions = {},
): Promise<Http1Reply> {
  const { body, discardBody = false } = options;
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        host: "127.0.0.1",
        port,
        method,
        path,
        headers: {
          "harn-agents-protocol-version": HARN_VERSION,
          ...options.headers,
          ...(body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) }),
        },
      },
      (res) => {
        let text = "";
        if (discardBody) res.resume();
        else {
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            text += chunk;
          });
        }
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
