// Distributed mode on one machine: every service as its own process against the
// real Postgres and NATS, as `trellis mesh` runs it.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdapterRegistryService } from "@trellis/contracts/adapters";
import { createMeshClientInterceptor, MeshCredentials } from "@trellis/platform";
import { eventually } from "@trellis/testkit";
import { testGround } from "@trellis/testkit/ground";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHealth, type Mesh, startMesh } from "../src/mesh.js";

describe("distributed mesh", () => {
  let mesh: Mesh;
  const ground = testGround("mesh");

  beforeAll(async () => {
    mesh = await startMesh({ ...(await ground.prepare()), adapterWorkers: 1 });
  }, 90_000);

  afterAll(async () => {
    await mesh?.stop();
    await ground.remove();
  });

  it("runs every service and the adapter worker as its own SERVING process", async () => {
    expect(Object.keys(mesh.urls).sort()).toEqual([
      "adapter-worker",
      "adapters",
      "chat",
      "gateway",
      "receipts",
      "tasks",
    ]);
    for (const url of Object.values(mesh.urls)) expect(await checkHealth(url)).toBe("SERVING");
  });

  it("registers the worker's harness backend with the adapters service", async () => {
    const signer = createMeshClientInterceptor(
      new MeshCredentials(mesh.meshSecret as string),
      "mesh-test",
    );
    const registry = createClient(
      AdapterRegistryService,
      createGrpcTransport({ baseUrl: mesh.urls.adapters as string, interceptors: [signer] }),
    );
    const remote = await eventually(
      async () => {
        const { backends } = await registry.listBackends({});
        const found = backends.filter((b) => !b.inProcess && b.backendId === "harness");
        return found.length > 0 ? found : undefined;
      },
      // Registration rides on the worker's 1 s heartbeat; a loaded CI machine
      // has taken over 10 s from SERVING to the first announcement seen.
      { what: "the mesh's adapter worker to register the harness backend", timeoutMs: 25_000 },
    );
    expect(remote).toHaveLength(1);
  }, 30_000);

  it("brings a killed service back", async () => {
    await mesh.kill("tasks");
    await expect(checkHealth(mesh.urls.tasks as string, 500)).rejects.toThrow();
    await mesh.restart("tasks");
    expect(await checkHealth(mesh.urls.tasks as string)).toBe("SERVING");
  }, 60_000);
});
