// Distributed mode on one machine: every service as its own process against the
// real Postgres and NATS, as `trellis mesh` runs it.
import {
  createTestDatabase,
  deleteTestStreams,
  type TestDatabase,
  testNatsUrl,
  uniqueName,
} from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHealth, type Mesh, startMesh } from "../src/mesh.js";

describe("distributed mesh", () => {
  let db: TestDatabase;
  let mesh: Mesh;
  const prefix = uniqueName("mesh");

  beforeAll(async () => {
    db = await createTestDatabase("trellis_mesh");
    mesh = await startMesh({ databaseUrl: db.url, natsUrl: testNatsUrl, natsPrefix: prefix });
  }, 90_000);

  afterAll(async () => {
    await mesh?.stop();
    await db?.drop();
    await deleteTestStreams(prefix);
  });

  it("runs every service as its own SERVING process", async () => {
    expect(Object.keys(mesh.urls).sort()).toEqual([
      "adapters",
      "chat",
      "gateway",
      "receipts",
      "tasks",
    ]);
    for (const url of Object.values(mesh.urls)) expect(await checkHealth(url)).toBe("SERVING");
  });

  it("brings a killed service back", async () => {
    await mesh.kill("tasks");
    await expect(checkHealth(mesh.urls.tasks as string, 500)).rejects.toThrow();
    await mesh.restart("tasks");
    expect(await checkHealth(mesh.urls.tasks as string)).toBe("SERVING");
  }, 60_000);
});
