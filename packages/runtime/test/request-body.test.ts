// The request body as services read it: a caller that goes away mid-request
// is a cancel (Canceled), never an error Connect would answer as Internal.
import { PassThrough } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { requestBody } from "../src/request-body.js";
import type { HttpRequest } from "../src/server.js";

async function readAll(body: AsyncIterable<Uint8Array>): Promise<number> {
  let size = 0;
  for await (const chunk of body) size += chunk.byteLength;
  return size;
}

describe("requestBody", () => {
  it("yields the body's bytes", async () => {
    const req = new PassThrough();
    req.end(Buffer.from("hello world"));
    expect(await readAll(requestBody(req as unknown as HttpRequest, 1024))).toBe(11);
  });

  it("turns a premature close of the request into Canceled", async () => {
    const req = new PassThrough();
    req.write(Buffer.from("partial"));
    const reading = readAll(requestBody(req as unknown as HttpRequest, 1024));
    const premature = Object.assign(new Error("Premature close"), {
      code: "ERR_STREAM_PREMATURE_CLOSE",
    });
    setTimeout(() => req.destroy(premature), 10);
    const error = await reading.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Canceled);
    expect((error as ConnectError).cause).toBe(premature);
  });
});
