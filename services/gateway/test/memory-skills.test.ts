/**
 * Memory and skills through the gateway (embedded: gateway, tasks,
 * adapters): `/v1/memories` CRUD with typed refusals that store nothing,
 * Idempotency-Key, the memory scopes, another workspace's record as 404;
 * `/v1/skills` derived from agents and tool declarations, and the agent
 * card listing them.
 */
import { randomBytes } from "node:crypto";
import { harnClient, type Json } from "@trellis/gateway/testing";
import { describe, expect, it } from "vitest";
import { embeddedGateway } from "./support/embedded.js";

const ADMIN_KEY = `trellis-memory-admin-${randomBytes(16).toString("hex")}`;

const gw = embeddedGateway("memory", ADMIN_KEY);

describe("memory over REST", () => {
  it("creates, reads, lists and deletes memory with its provenance", async () => {
    const client = await gw.clientWith("default", ["memory:read", "memory:write"]);
    const created = await client.post("/v1/memories", {
      scope: "workspace",
      owner_id: "default",
      content: { fact: "the build runs on Fridays" },
      provenance: { note: "from the runbook" },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({
      object: "memory",
      scope: "workspace",
      owner_id: "default",
      workspace_id: "default",
      content: { fact: "the build runs on Fridays" },
      provenance: { note: "from the runbook", source: "api", actor_id: "memory" },
    });
    const id = created.json.id as string;
    expect((await client.get(`/v1/memories/${id}`)).json.content).toEqual({
      fact: "the build runs on Fridays",
    });
    const listed = await client.get("/v1/memories?scope=workspace");
    expect(listed.json.object).toBe("list");
    expect(listed.json.data.map((m: Json) => m.id)).toContain(id);

    const deleted = await client.request("DELETE", `/v1/memories/${id}`);
    expect(deleted.status).toBe(204);
    expect((await client.get(`/v1/memories/${id}`)).status).toBe(404);
  });

  it("refuses an unknown scope and oversized content with typed errors, storing nothing", async () => {
    const client = await gw.clientWith("default", ["memory:read", "memory:write"]);
    const before = (await client.get("/v1/memories?limit=100")).json.data.length;
    const unknown = await client.post("/v1/memories", {
      scope: "galaxy",
      owner_id: "x",
      content: "hi",
      provenance: {},
    });
    expect([unknown.status, unknown.json.error.code, unknown.json.error.param]).toEqual([
      400,
      "invalid_request",
      "scope",
    ]);
    const big = await client.post("/v1/memories", {
      scope: "workspace",
      content: "x".repeat(70 * 1024),
      provenance: {},
    });
    expect([big.status, big.json.error.code]).toEqual([413, "payload_too_large"]);
    const badContent = await client.post("/v1/memories", {
      scope: "workspace",
      content: 42,
      provenance: {},
    });
    expect(badContent.status).toBe(400);
    expect((await client.get("/v1/memories?limit=100")).json.data).toHaveLength(before);
    expect((await client.get("/v1/memories?scope=galaxy")).status).toBe(400);
  });

  it("replays a create with the same Idempotency-Key, and keeps workspaces and scopes apart", async () => {
    const client = await gw.clientWith("default", ["memory:read", "memory:write"]);
    const body = { scope: "workspace", content: "once", provenance: {} };
    const headers = { "idempotency-key": `mem-${randomBytes(4).toString("hex")}` };
    const first = await client.post("/v1/memories", body, { headers });
    const again = await client.post("/v1/memories", body, { headers });
    expect(first.status).toBe(201);
    expect(again.json.id).toBe(first.json.id);

    const stranger = await gw.clientWith("ws_stranger", ["memory:read"]);
    expect((await stranger.get(`/v1/memories/${first.json.id}`)).status).toBe(404);
    expect((await stranger.get("/v1/memories")).json.data).toHaveLength(0);
    const reader = await gw.clientWith("default", ["sessions:read"]);
    expect((await reader.get("/v1/memories")).status).toBe(403);
  });
});

describe("skills", () => {
  it("lists the agents' and tools' skills with their schemas, and the agent card lists them", async () => {
    const admin = harnClient(gw.base, ADMIN_KEY);
    const persona = await admin.post("/v1/personas", {
      name: "skilled",
      description: "answers questions",
      backend: "scripted",
      definition: {
        entry: "a",
        nodes: { a: { update: { messages: [{ role: "assistant", content: "hi" }] } } },
        edges: [{ from: "a", to: "END" }],
      },
    });
    expect(persona.status, persona.text).toBe(201);
    const listed = await admin.get("/v1/skills?limit=100");
    expect(listed.status, listed.text).toBe(200);
    const byId = new Map<string, Json>(listed.json.data.map((s: Json) => [s.id, s]));
    expect(byId.get(persona.json.id)).toMatchObject({
      object: "skill",
      name: "skilled",
      description: "answers questions",
      source: "agent",
      input_schema: { type: "object" },
    });
    expect(byId.get("tool:memory_read")).toMatchObject({
      object: "skill",
      source: "tool",
      input_schema: { type: "object", required: ["scope"] },
      output_schema: { type: "object", required: ["memories"] },
    });
    const one = await admin.get("/v1/skills/tool:memory_write");
    expect(one.json).toMatchObject({ id: "tool:memory_write", name: "memory_write" });
    expect((await admin.get("/v1/skills/tool:nope")).status).toBe(404);
    expect((await admin.get("/v1/skills/agent_nope")).status).toBe(404);

    const card = await admin.get("/v1/agent-card", { key: null, version: null });
    const cardSkills = card.json.skills.map((s: Json) => s.id);
    expect(cardSkills).toContain("tool:memory_read");
    expect(cardSkills).toContain(persona.json.id);
  });
});
