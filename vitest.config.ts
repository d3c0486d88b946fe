import { randomBytes } from "node:crypto";
import { configDefaults, defineConfig } from "vitest/config";

/**
 * Test files that need a process of their own: they install process-wide
 * state that a file run before them in the same worker would already have
 * set (OpenTelemetry's global tracer provider, `vi.mock` of a module others
 * import). Every other file shares its worker, and the modules it imported,
 * with the files run before it (`isolate: false`), so the project's modules
 * are imported once per worker instead of once per file (the suite's time:
 * docs/benchmarks.md, session 21). A file that needs
 * its own process goes in this list (test/test-isolation.test.ts finds
 * the ones that call `vi.mock` or `initTelemetry` and fails if one is not).
 */
export const ownProcess = [
  "packages/runtime/test/tracing.test.ts",
  "test/tracing/model-span.test.ts",
  "packages/execution/test/harness/mcp-outbound.test.ts",
];

const testFiles = [
  "packages/*/test/**/*.test.ts",
  "services/*/test/**/*.test.ts",
  "test/**/*.test.ts",
  "ui/test/**/*.test.ts",
];

export default defineConfig({
  test: {
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
    projects: [
      { extends: true, test: { name: "own-process", include: ownProcess } },
      {
        extends: true,
        test: {
          name: "shared",
          include: testFiles,
          exclude: [...configDefaults.exclude, ...ownProcess],
          isolate: false,
        },
      },
    ],
  },
});
