// Workspaces over gRPC through the gateway, in both modes: the admin key
// creates, lists, updates and archives a workspace and works in it at once;
// a key bound to a workspace can do none of that to workspaces.
import { type Client, Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService, WorkspaceService } from "@trellis/contracts/tasks";
import { harnClient } from "@trellis/gateway/testing";
import { errorDetailOf } from "@trellis/runtime";
import { bearer, callFailure } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";

describe.each(gatewayModes({ name: "ws_grpc" }))("workspaces over gRPC: $mode", ({ start }) => {
  let trellis: Running;
  let workspaces: Client<typeof WorkspaceService>;
  let sessions: Client<typeof SessionService>;
  let bound: Client<typeof WorkspaceService>;

  beforeAll(async () => {
    trellis = await start();
    const as = (key: string) =>
      createGrpcTransport({
        baseUrl: trellis.url,
        interceptors: [bearer(key)],
      });
    workspaces = createClient(WorkspaceService, as(ADMIN_KEY));
    sessions = createClient(SessionService, as(ADMIN_KEY));
    const key = await harnClient(trellis.url, ADMIN_KEY).post("/v1/api-keys", {
      name: "bound",
      scopes: ["workspaces:read", "sessions:write"],
    });
    expect(key.status, key.text).toBe(201);
    bound = createClient(WorkspaceService, as(key.json.key));
  }, 120_000);
  afterAll(async () => {
    await trellis?.close();
  });

  it("creates, lists, updates and archives; the admin key works in the new workspace", async () => {
    const { workspace } = await workspaces.createWorkspace({
      name: "grpc-ws",
      root: "/grpc",
      metadata: { keep: 1, drop: 2 },
    });
    const id = workspace!.id;
    const listed = await workspaces.listWorkspaces({ pageSize: 200 });
    expect(listed.workspaces.map((w) => w.id)).toEqual(expect.arrayContaining(["default", id]));
    expect((await workspaces.getWorkspace({ workspaceId: id })).workspace?.name).toBe("grpc-ws");

    const { session } = await sessions.createSession({ workspaceId: id });
    expect(session?.workspaceId).toBe(id);
    expect((await sessions.getSession({ sessionId: session!.id })).session?.id).toBe(session!.id);

    const { workspace: updated } = await workspaces.updateWorkspace({
      workspaceId: id,
      name: "grpc-renamed",
      metadata: { drop: null, add: "x" },
    });
    expect(updated?.name).toBe("grpc-renamed");
    expect(updated?.metadata).toEqual({ keep: 1, add: "x" });
    const blank = await callFailure(workspaces.updateWorkspace({ workspaceId: id, name: " " }));
    expect(blank.code).toBe(Code.InvalidArgument);

    const { workspace: archived } = await workspaces.archiveWorkspace({ workspaceId: id });
    expect(archived?.archivedAt).toBeDefined();
    const closed = await callFailure(sessions.createSession({ workspaceId: id }));
    expect(errorDetailOf(closed)?.reason).toBe("conflict");
    const missing = await callFailure(workspaces.archiveWorkspace({ workspaceId: "ws_nowhere" }));
    expect(missing.code).toBe(Code.NotFound);
  });

  it("refuses workspace changes to a key bound to a workspace", async () => {
    for (const call of [
      () => bound.createWorkspace({ name: "nope" }),
      () => bound.updateWorkspace({ workspaceId: "default", name: "nope" }),
      () => bound.archiveWorkspace({ workspaceId: "default" }),
    ]) {
      expect((await callFailure(call())).code).toBe(Code.PermissionDenied);
    }
    const own = await bound.listWorkspaces({});
    expect(own.workspaces.map((w) => w.id)).toEqual(["default"]);
  });
});
