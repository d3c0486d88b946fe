/** The distributed mesh as the benches run it. */
import type { TestDatabase } from "@trellis/testkit";
import { testGround } from "@trellis/testkit/ground";
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
  const ground = testGround(name);
  const mesh = await startMesh({ ...options, ...(await ground.prepare()) }).catch(
    async (error: unknown) => {
      await ground.remove();
      throw error;
    },
  );
  return {
    mesh,
    db: ground.db,
    async stop() {
      await mesh.stop();
      await ground.remove();
    },
  };
}
