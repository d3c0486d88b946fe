/** The distributed mesh as the benches run it. */
import {
  createTestDatabase,
  deleteTestStreams,
  type TestDatabase,
  testNatsUrl,
  uniqueName,
} from "@trellis/testkit";
import { type Mesh, type MeshOptions, startMesh } from "../../src/mesh.js";

export { defaultMeshTogether, parseTogether } from "../../src/mesh-groups.js";

/** A mesh of its own: a fresh database of the test PostgreSQL and a fresh NATS prefix. */
export interface BenchMesh {
  mesh: Mesh;
  db: TestDatabase;
  /** Stops the mesh, drops its database and deletes its streams. */
  stop(): Promise<void>;
}

/** `trellis mesh` on a database and NATS prefix named after `name`. */
export async function startBenchMesh(
  name: string,
  options: Omit<MeshOptions, "databaseUrl" | "natsUrl" | "natsPrefix"> = {},
): Promise<BenchMesh> {
  const db = await createTestDatabase(`trellis_${name}`);
  const prefix = uniqueName(name);
  const mesh = await startMesh({
    ...options,
    databaseUrl: db.url,
    natsUrl: testNatsUrl,
    natsPrefix: prefix,
  });
  return {
    mesh,
    db,
    async stop() {
      await mesh.stop();
      await db.drop();
      await deleteTestStreams(prefix);
    },
  };
}
