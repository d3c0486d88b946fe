/**
 * Conformance flows of who may do what, and what leaves the server:
 * auth-and-scopes, vaults and webhooks. Each starts by creating a workspace
 * and works in it.
 */
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { type HarnClient, type Json, poll } from "./client.js";
import {
  expectError,
  newKey,
  newSession,
  newWorkspace,
  submit,
  textInput,
  waitTask,
} from "./steps.js";

export function authFlows(api: () => HarnClient): void {
  describe("auth-and-scopes", () => {
    it("asks for the version first (426), then a valid key (401)", async () => {
      expectError(
        await api().get("/v1/sessions", { version: null }),
        426,
        "unsupported_protocol_version",
      );
      expectError(await api().get("/v1/sessions", { key: null }), 401, "unauthenticated");
      const wrong = "sk-not-a-real-key-0123456789";
      const refused = await api().get("/v1/sessions", { key: wrong });
      expectError(refused, 401, "unauthenticated");
      expect(refused.text).not.toContain(wrong);
    });

    it("holds a workspace key to its scopes (403) and its workspace (404)", async () => {
      const mine = await newWorkspace(api(), "auth-mine");
      const theirs = await newWorkspace(api(), "auth-theirs");
      const mySession = await newSession(api(), mine);
      const theirSession = await newSession(api(), theirs);
      const reader = api().as(await newKey(api(), mine, ["sessions:read", "workspaces:read"]));

      const own = await reader.get(`/v1/sessions/${mySession}`);
      expect(own.status, own.text).toBe(200);
      const listed = await reader.get("/v1/sessions");
      expect(listed.json.data.map((s: Json) => s.id)).toEqual([mySession]);
      const workspaces = await reader.get("/v1/workspaces");
      expect(workspaces.json.data.map((w: Json) => w.id)).toEqual([mine]);

      // Missing scope: 403 naming it.
      const write = await reader.post("/v1/sessions", { workspace_id: mine });
      expectError(write, 403, "permission_denied");
      expect(write.json.error.details.required_scope).toBe("sessions:write");
      // Workspaces are created by admin keys only.
      expectError(
        await reader.post("/v1/workspaces", { name: "x", root: "/x" }),
        403,
        "permission_denied",
      );
      // Another workspace's resources are absent, never forbidden.
      expectError(await reader.get(`/v1/sessions/${theirSession}`), 404, "resource_not_found");
      expectError(await reader.get(`/v1/workspaces/${theirs}`), 404, "resource_not_found");
      expectError(
        await reader.get(`/v1/sessions?workspace_id=${theirs}`),
        404,
        "resource_not_found",
      );
    });

    it("lets a workspace's own writer work in it and nowhere else", async () => {
      const mine = await newWorkspace(api(), "auth-writer");
      const theirs = await newWorkspace(api(), "auth-writer-other");
      const writer = api().as(
        await newKey(api(), mine, ["sessions:read", "sessions:write", "tasks:read", "tasks:write"]),
      );
      const created = await writer.post("/v1/sessions", {});
      expect(created.status, created.text).toBe(201);
      expect(created.json.workspace_id).toBe(mine);
      const task = await submit(writer, created.json.id, "my own work");
      expect((await waitTask(writer, task.id)).status).toBe("COMPLETED");
      expectError(
        await writer.post("/v1/sessions", { workspace_id: theirs }),
        404,
        "resource_not_found",
      );
      const theirSession = await newSession(api(), theirs);
      expectError(
        await writer.post(`/v1/sessions/${theirSession}/tasks`, { input: textInput("intrude") }),
        404,
        "resource_not_found",
      );
    });
  });
}

export function vaultFlows(api: () => HarnClient): void {
  describe("vaults", () => {
    it("creates a vault in the workspace and never answers a secret", async () => {
      const workspaceId = await newWorkspace(api(), "vaults");
      const created = await api().post("/v1/vaults", {
        workspace_id: workspaceId,
        provider: "trellis",
        capabilities: ["read", "write"],
      });
      expect(created.status, created.text).toBe(201);
      expect(created.json).toMatchObject({ object: "vault", workspace_id: workspaceId });
      const id = created.json.id;
      expect((await api().get(`/v1/vaults/${id}`)).json.id).toBe(id);
      const listed = await api().get(`/v1/vaults?workspace_id=${workspaceId}`);
      expect(listed.json.data.map((v: Json) => v.id)).toEqual([id]);

      const secret = "s3cr3t-conformance-value";
      const put = await api().request("PUT", `/v1/vaults/${id}/secrets/API_TOKEN`, {
        value: secret,
      });
      expect(put.status, put.text).toBeLessThan(300);
      expect(put.text).not.toContain(secret);
      const secrets = await api().get(`/v1/vaults/${id}/secrets`);
      expect(secrets.status).toBe(200);
      expect(secrets.text).toContain("API_TOKEN");
      expect(secrets.text).not.toContain(secret);

      const outsider = api().as(
        await newKey(api(), await newWorkspace(api(), "vaults-other"), ["vaults:read"]),
      );
      expectError(await outsider.get(`/v1/vaults/${id}`), 404, "resource_not_found");
    });

    it("answers a provider it lacks with 201 (supported) or 501 naming what it has", async () => {
      const workspaceId = await newWorkspace(api(), "vaults-oauth");
      const reply = await api().post("/v1/vaults", {
        workspace_id: workspaceId,
        provider: "conformance-oauth",
        capabilities: ["oauth_refresh"],
      });
      if (reply.status === 201) {
        expect(reply.json).toMatchObject({
          provider: "conformance-oauth",
          workspace_id: workspaceId,
        });
      } else {
        expectError(reply, 501, "not_implemented");
        expect(reply.json.error.param).toBe("provider");
        expect(reply.json.error.message).toContain("trellis");
        const listed = await api().get(`/v1/vaults?workspace_id=${workspaceId}`);
        expect(listed.json.data).toEqual([]);
      }
    });
  });
}

/** A local HTTP receiver of webhook deliveries. */
interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

async function receiver(): Promise<{ server: Server; url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(204).end();
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}/hook`, received };
}

/** Standard Webhooks: HMAC-SHA256 of `id.timestamp.body`, keyed by the base64 secret. */
function signatureValid(secret: string, delivery: Received): boolean {
  const id = String(delivery.headers["webhook-id"]);
  const timestamp = String(delivery.headers["webhook-timestamp"]);
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const expected = createHmac("sha256", key)
    .update(`${id}.${timestamp}.${delivery.body}`)
    .digest("base64");
  return String(delivery.headers["webhook-signature"])
    .split(" ")
    .some((entry) => entry === `v1,${expected}`);
}

export function webhookFlows(api: () => HarnClient): void {
  describe("webhooks", () => {
    const servers: Server[] = [];
    afterAll(async () => {
      for (const server of servers) server.close();
    });

    it("delivers a workspace's events, signed, to a registered receiver", async () => {
      const workspaceId = await newWorkspace(api(), "webhooks");
      const hook = await receiver();
      servers.push(hook.server);
      const registered = await api().post("/v1/webhooks", {
        workspace_id: workspaceId,
        url: hook.url,
        event_types: ["task.completed"],
      });
      expect(registered.status, registered.text).toBe(201);
      expect(registered.json.workspace_id).toBe(workspaceId);
      const secret: string = registered.json.secret;
      expect(secret).toEqual(expect.any(String));
      expect((await api().get(`/v1/webhooks/${registered.json.id}`)).text).not.toContain(secret);

      // Another workspace's task must not reach this receiver.
      const other = await newWorkspace(api(), "webhooks-other");
      const otherTask = await submit(api(), await newSession(api(), other), "elsewhere");
      await waitTask(api(), otherTask.id);

      const sessionId = await newSession(api(), workspaceId);
      const task = await submit(api(), sessionId, "tell the webhook");
      await waitTask(api(), task.id);
      const delivery = await poll("a webhook delivery", async () =>
        hook.received.find((r) => JSON.parse(r.body).data?.task_id === task.id),
      );
      const body = JSON.parse(delivery.body);
      expect(body.type).toBe("task.completed");
      expect(body.data.workspace_id).toBe(workspaceId);
      expect(signatureValid(secret, delivery)).toBe(true);
      expect(signatureValid(secret, { ...delivery, body: `${delivery.body} ` })).toBe(false);
      expect(hook.received.every((r) => JSON.parse(r.body).data?.task_id !== otherTask.id)).toBe(
        true,
      );
      expect(hook.received.every((r) => JSON.parse(r.body).type === "task.completed")).toBe(true);
    });

    it("refuses a webhook that is not a URL, in the envelope", async () => {
      const workspaceId = await newWorkspace(api(), "webhooks-bad");
      const reply = await api().post("/v1/webhooks", {
        workspace_id: workspaceId,
        url: "not a url",
      });
      expectError(reply, 400, "invalid_request");
      expect(reply.json.error.param).toBe("url");
    });
  });
}
