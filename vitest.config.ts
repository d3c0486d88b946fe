import { randomBytes } from "node:crypto";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: [
      "packages/*/test/**/*.test.ts",
      "services/*/test/**/*.test.ts",
      "test/**/*.test.ts",
      "ui/test/**/*.test.ts",
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration suites share two real servers; keep parallelism modest on 2 cores.
    maxWorkers: 2,
    // One service credential secret per run, shared by every test process and
    // the service processes they start (packages/platform mesh.ts); a test
    // that calls an internal service directly signs with it as a mesh peer.
    env: {
      TRELLIS_MESH_SECRET: process.env.TRELLIS_MESH_SECRET ?? randomBytes(32).toString("base64url"),
    },
  },
});
