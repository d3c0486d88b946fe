/**
 * Issue 22, finding 3: artifact media types are checked on create (REST and
 * Connect), and content is served as an attachment under a sandboxing CSP
 * with `nosniff`, never rendered inline from the API's (and `/ui`'s) origin.
 */

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { send } from "../src/http/io.js";
import { gatewayWithTasks } from "./support/embedded.js";

const ADMIN_KEY = "trellis-hardening-artifacts-key-0123456789";

describe("artifacts: media types and how content is served", () => {
  const gateway = gatewayWithTasks(ADMIN_KEY);

  /** Register a file artifact with text content over REST. */
  const registerFile = (name: string, mimeType: string, content: string) =>
    gateway.admin.post("/v1/artifacts", { kind: "file", name, mime_type: mimeType, content });

  it.each([
    "text/plain\r\nSet-Cookie: a=b",
    "text/plain\nx",
    "text",
    "text/",
    "/plain",
    "text/plain; charset",
    "text /plain",
    `application/${"x".repeat(300)}`,
  ])("refuses mime_type %j over REST with 400 naming the field", async (mimeType) => {
    const res = await registerFile("a.txt", mimeType, "hi");
    expect(res.status, res.text).toBe(400);
    expect(res.json.error).toMatchObject({ code: "invalid_request", param: "mime_type" });
  });

  it("refuses a CR/LF media type over Connect too (InvalidArgument naming the field)", async () => {
    const res = await fetch(`${gateway.base}/trellis.tasks.v1.ArtifactService/RegisterArtifact`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_KEY}` },
      body: JSON.stringify({
        artifact: {
          workspaceId: "default",
          name: "a",
          mimeType: "text/plain\r\nSet-Cookie: a=b",
        },
        content: Buffer.from("hi").toString("base64"),
      }),
    });
    const body = (await res.json()) as { code: string; message: string };
    expect(res.status, JSON.stringify(body)).toBe(400);
    expect(body.code).toBe("invalid_argument");
    expect(body.message).toMatch(/mime_type/);
  });

  it("accepts well-formed types with parameters", async () => {
    for (const mimeType of [
      "text/plain; charset=utf-8",
      'text/plain;format="flowed"',
      "application/vnd.a+json",
    ]) {
      const res = await registerFile("ok", mimeType, "x");
      expect(res.status, res.text).toBe(201);
      expect(res.json.mime_type).toBe(mimeType);
    }
  });

  it("serves text/html content as a sandboxed attachment with nosniff", async () => {
    const created = await registerFile(
      "page <1>.html",
      "text/html",
      "<script>alert(document.cookie)</script>",
    );
    expect(created.status, created.text).toBe(201);
    const res = await gateway.admin.get(`/v1/artifacts/${created.json.id}/content`);
    expect(res.status).toBe(200);
    expect(res.text).toBe("<script>alert(document.cookie)</script>");
    expect(res.headers.get("content-type")).toBe("text/html");
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="page__1_.html"/);
    expect(res.headers.get("content-disposition")).toContain(
      "filename*=UTF-8''page%20%3C1%3E.html",
    );
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("sandbox");
    expect(csp).toContain("default-src 'none'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  });
});

describe("send: a header Node refuses", () => {
  it("answers 500 with the envelope, and res.statusCode (what the access log reads) says 500", async () => {
    let logged = 0;
    const server = createServer((_req, res) => {
      send(res, {
        status: 200,
        body: "x",
        headers: { "content-type": "text/plain\r\nSet-Cookie: a=b" },
      });
      logged = res.statusCode;
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/`);
      expect(res.status).toBe(500);
      expect(res.headers.get("set-cookie")).toBeNull();
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("internal_error");
      expect(logged).toBe(500);
    } finally {
      server.close();
    }
  });
});
