/**
 * Issue 22, finding 1: structures a caller controls are bounded before any
 * protobuf conversion — key counts, values, key and string lengths, total
 * size, depth — over REST and Connect, refused as InvalidArgument / 400
 * naming the field; list reads stay cheap.
 */

import { randomBytes } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService } from "@trellis/contracts/tasks";
import { bearer } from "@trellis/testkit";
import { describe, expect, it } from "vitest";
import { gatewayWithTasks } from "./support/embedded.js";

const ADMIN_KEY = "trellis-hardening-structures-key-0123456789";

function manyKeys(count: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < count; i++) out[`k${i}`] = "v";
  return out;
}

describe("structure limits before conversion", () => {
  const gateway = gatewayWithTasks(ADMIN_KEY);

  it("refuses 200,000-key metadata over REST with 400 naming metadata", async () => {
    const res = await gateway.admin.post("/v1/sessions", {
      workspace_id: "default",
      metadata: manyKeys(200_000),
    });
    expect(res.status, res.text.slice(0, 300)).toBe(400);
    expect(res.json.error).toMatchObject({
      code: "invalid_request",
      param: "metadata",
      details: { metadata: { limit_keys: "1000" } },
    });
    expect(res.json.error.message).toMatch(/metadata has more than 1000 keys/);
  });

  it("refuses it over Connect JSON too, naming the field", async () => {
    const res = await fetch(`${gateway.base}/trellis.tasks.v1.SessionService/CreateSession`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_KEY}` },
      body: JSON.stringify({ workspaceId: "default", metadata: manyKeys(200_000) }),
    });
    const body = (await res.json()) as { code: string; message: string };
    expect(res.status).toBe(400);
    expect(body.code).toBe("invalid_argument");
    expect(body.message).toMatch(/metadata has more than 1000 keys/);
  });

  it.each(["grpc", "connect"] as const)(
    "refuses it in binary protobuf (%s) before decoding, naming the field",
    async (protocol) => {
      const auth = bearer(ADMIN_KEY);
      const baseUrl = gateway.base;
      const transport =
        protocol === "grpc"
          ? createGrpcTransport({ baseUrl, interceptors: [auth] })
          : createConnectTransport({
              baseUrl,
              interceptors: [auth],
              httpVersion: "1.1",
              useBinaryFormat: true,
            });
      const client = createClient(SessionService, transport);
      const error = await client
        .createSession({ workspaceId: "default", metadata: manyKeys(200_000) })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(error?.code).toBe(Code.InvalidArgument);
      expect(error?.rawMessage).toMatch(/metadata has more than 1000 keys/);
      // Within the limits, the same call goes through.
      const ok = await client.createSession({ workspaceId: "default", metadata: manyKeys(10) });
      expect(Object.keys(ok.session?.metadata ?? {})).toHaveLength(10);
    },
  );

  it("lists a session stored with metadata past 2 MiB as a marker, and reads it whole by id", async () => {
    // Within the key and value counts, so gRPC accepts it; too large to list cheaply.
    const auth = bearer(ADMIN_KEY);
    const client = createClient(
      SessionService,
      createGrpcTransport({ baseUrl: gateway.base, interceptors: [auth] }),
    );
    const metadata: Record<string, string> = {};
    for (let i = 0; i < 800; i++) metadata[`k${i}`] = randomBytes(3000).toString("base64");
    const { session } = await client.createSession({ workspaceId: "default", metadata });
    const list = await gateway.admin.get("/v1/sessions?limit=100");
    expect(list.status).toBe(200);
    const listed = list.json.data.find((s: { id: string }) => s.id === session?.id);
    expect(Object.keys(listed.metadata)).toEqual(["trellis_omitted"]);
    const whole = await gateway.admin.get(`/v1/sessions/${session?.id}`);
    expect(Object.keys(whole.json.metadata)).toHaveLength(800);
  });

  it("refuses too many values, long keys and long strings, each naming where", async () => {
    const wide = await gateway.admin.post("/v1/sessions", {
      metadata: { list: Array.from({ length: 100_001 }, () => 0) },
    });
    expect(wide.status).toBe(400);
    expect(wide.json.error.param).toBe("metadata.list");

    const longKey = await gateway.admin.post("/v1/sessions", {
      metadata: { ["k".repeat(1025)]: 1 },
    });
    expect(longKey.status).toBe(400);
    expect(longKey.json.error.param).toBe("metadata");

    const longString = await gateway.admin.post("/v1/sessions", {
      metadata: { note: { text: "x".repeat(262_145) } },
    });
    expect(longString.status).toBe(400);
    expect(longString.json.error).toMatchObject({
      param: "metadata.note.text",
      details: { metadata: { limit_string_length: "262144" } },
    });

    const total = await gateway.admin.post("/v1/sessions", {
      metadata: Object.fromEntries(
        Array.from({ length: 5 }, (_, i) => [`k${i}`, "y".repeat(250_000)]),
      ),
    });
    expect(total.status).toBe(400);
    expect(total.json.error).toMatchObject({
      param: "metadata",
      details: { metadata: { limit_total_length: "1048576" } },
    });
  });

  it("says the nesting limit it enforces: 46 JSON levels by default", async () => {
    const deep = (n: number) => `{"metadata":{"a":${"[".repeat(n)}${"]".repeat(n)}}}`;
    const res = await gateway.admin.post("/v1/sessions", deep(46));
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(/deeper than 46 levels/);
    expect(res.json.error.details.metadata).toEqual({ limit_depth: "46" });
    expect((await gateway.admin.post("/v1/sessions", deep(40))).status).toBe(201);
  });

  it("accepts metadata within the limits and lists it back", async () => {
    const metadata = { ...manyKeys(1000) };
    const created = await gateway.admin.post("/v1/sessions", { workspace_id: "default", metadata });
    expect(created.status, created.text.slice(0, 300)).toBe(201);
    const list = await gateway.admin.get("/v1/sessions?limit=50");
    expect(list.status).toBe(200);
    const found = list.json.data.find((s: { id: string }) => s.id === created.json.id);
    expect(Object.keys(found.metadata)).toHaveLength(1000);
  });
});
