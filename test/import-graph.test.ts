/**
 * The import graph of the shipped source (the same files `npm run lint`
 * checks), type-only imports included:
 *
 * - no import cycle, at any length;
 * - no import from one service's package into another service's package, and
 *   none from a shared package (`packages/*`) into a service: arrows point
 *   down. The root app (`src/`) wires the services together and may import
 *   them all;
 * - between shared packages, only the arrows of docs/architecture.md's Map
 *   (`packageArrows`).
 *
 * And of the tests and benchmarks (bench/, test/, every unit's test/): none
 * imports another unit's `src/` or `test/` files by relative path, only
 * through its package's entry points (`@trellis/<name>` and its subpath
 * exports, such as `@trellis/receipts/testing`), so a unit's inside can move
 * without breaking its neighbours' tests.
 *
 * The graph is dpdm's (the lint's tool), read with `transform: false` so that
 * `import type` edges count.
 */
import { resolve } from "node:path";
import { type Dependency, type DependencyTree, parseCircular, parseDependencyTree } from "dpdm";
import { beforeAll, describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..");
const sources = ["src/**/*.ts", "packages/*/src/**/*.ts", "services/*/src/**/*.ts"];
/** The tests and benchmarks (their imports into shipped source come along). */
const testSources = [
  "bench/**/*.ts",
  "test/**/*.ts",
  "packages/*/test/**/*.ts",
  "services/*/test/**/*.ts",
  "ui/test/**/*.ts",
];

/**
 * Known imports across services, each with why it is still there. Adding one
 * needs a reason here; removing one is progress.
 */
const allowedAcrossServices: readonly { from: string; to: string; why: string }[] = [];

/**
 * Known relative imports from a test or benchmark (files under `from`) into
 * another unit's `src/` or `test/` (files under `to`), each with why. Adding
 * one needs a reason here; removing one is progress.
 */
const allowedIntoInternals: readonly { from: string; to: string; why: string }[] = [
  {
    from: "bench",
    to: "src",
    why: "the root app has no package entry point; benchmarks start its services, mesh and dev server in process (src/services.ts, src/mesh.ts, src/cli/dev.ts)",
  },
  {
    from: "services/chat/test",
    to: "src",
    why: "chat-buf-curl.test.ts needs every service's RPCs (src/services.ts, the root app's list), which no package exports",
  },
  {
    from: "services/gateway/test",
    to: "src",
    why: "auth-keys.test.ts runs the root CLI's `keys` command (src/cli/keys.ts) on the gateway's key store; it would move to test/ with the CLI's tests",
  },
  {
    from: "services/receipts/test",
    to: "src",
    why: "cli.test.ts runs the root CLI's `receipts verify` (src/cli/receipts.ts); it would move to test/ with the CLI's tests",
  },
  {
    from: "services/gateway/test",
    to: "ui/src",
    why: "the UI is a Vite app without package entry points; the gateway's UI projection is checked against the UI's own reducer (ui/src/contract.ts)",
  },
];

/**
 * The arrows allowed between shared packages (docs/architecture.md, "Map"):
 * each package with the packages it may import. Services may import any
 * package, never another service; the root app (`src/`) may import anything.
 */
const packageArrows: Readonly<Record<string, readonly string[]>> = {
  "packages/contracts": [],
  "packages/runtime": ["packages/contracts"],
  "packages/messages": ["packages/contracts"],
  "packages/eventlog": ["packages/contracts", "packages/runtime"],
  // storage's contract suites (`*.contract.ts`) run on testkit's databases.
  "packages/storage": [
    "packages/contracts",
    "packages/eventlog",
    "packages/runtime",
    "packages/testkit",
  ],
  "packages/platform": [
    "packages/contracts",
    "packages/eventlog",
    "packages/runtime",
    "packages/storage",
  ],
  "packages/adapter-sdk": [
    "packages/contracts",
    "packages/eventlog",
    "packages/messages",
    "packages/runtime",
  ],
  "packages/execution": [
    "packages/adapter-sdk",
    "packages/contracts",
    "packages/eventlog",
    "packages/messages",
    "packages/platform",
    "packages/runtime",
    "packages/storage",
  ],
  "packages/testkit": ["packages/contracts", "packages/runtime"],
};

/** `services/<name>` or `packages/<name>` of a repository-relative path; undefined elsewhere. */
function unitOf(path: string): string | undefined {
  const match = /^(services|packages)\/([^/]+)\//.exec(path);
  return match ? `${match[1]}/${match[2]}` : undefined;
}

/**
 * Where a file is for the tests' rule: its unit (`services/<name>`,
 * `packages/<name>`, `ui`, `bench`, or the root app's `root`: `src/` and
 * `test/`) and its folder there (`src`, `test`, …); undefined elsewhere.
 */
function placeOf(path: string): { unit: string; folder: string } | undefined {
  const inUnit = /^((?:services|packages)\/[^/]+|ui)\/([^/]+)\//.exec(path);
  if (inUnit) return { unit: inUnit[1] as string, folder: inUnit[2] as string };
  if (path.startsWith("bench/")) return { unit: "bench", folder: "bench" };
  const inRoot = /^(src|test)\//.exec(path);
  return inRoot ? { unit: "root", folder: inRoot[1] as string } : undefined;
}

/** The cycles of a dependency tree, each as its files in order. */
function cyclesOf(tree: DependencyTree): string[][] {
  return parseCircular(tree);
}

/** Every import that crosses from a service or shared package into another service. */
function boundaryViolations(
  tree: DependencyTree,
  allowed: readonly { from: string; to: string }[] = allowedAcrossServices,
): string[] {
  const out = new Set<string>();
  for (const [issuer, deps] of Object.entries(tree)) {
    const from = unitOf(issuer);
    if (from === undefined || deps === null) continue;
    for (const dep of deps) {
      if (dep.id === null) continue;
      const to = unitOf(dep.id);
      if (to === undefined || to === from || !to.startsWith("services/")) continue;
      if (allowed.some((a) => a.from === from && a.to === to)) continue;
      out.add(`${issuer} -> ${dep.id} (${dep.request})`);
    }
  }
  return [...out].sort();
}

/**
 * Every relative import from a test or benchmark file into another unit's
 * `src/` or `test/` (an import by package name goes through the entry points).
 */
function internalsViolations(
  tree: DependencyTree,
  allowed: readonly { from: string; to: string }[] = allowedIntoInternals,
): string[] {
  const out = new Set<string>();
  for (const [issuer, deps] of Object.entries(tree)) {
    const from = placeOf(issuer);
    if (from === undefined || (from.folder !== "test" && from.unit !== "bench") || deps === null)
      continue;
    for (const dep of deps) {
      if (dep.id === null || !dep.request.startsWith(".")) continue;
      const to = placeOf(dep.id);
      if (to === undefined || to.unit === from.unit) continue;
      if (to.folder !== "src" && to.folder !== "test") continue;
      if (allowed.some((a) => issuer.startsWith(`${a.from}/`) && dep.id?.startsWith(`${a.to}/`)))
        continue;
      out.add(`${issuer} -> ${dep.id} (${dep.request})`);
    }
  }
  return [...out].sort();
}

/** Every import from a shared package into a package its arrows do not name. */
function arrowViolations(
  tree: DependencyTree,
  arrows: Readonly<Record<string, readonly string[]>> = packageArrows,
): string[] {
  const out = new Set<string>();
  for (const [issuer, deps] of Object.entries(tree)) {
    const from = unitOf(issuer);
    if (from === undefined || !from.startsWith("packages/") || deps === null) continue;
    for (const dep of deps) {
      if (dep.id === null) continue;
      const to = unitOf(dep.id);
      if (to === undefined || to === from || !to.startsWith("packages/")) continue;
      if (arrows[from]?.includes(to)) continue;
      out.add(`${issuer} -> ${dep.id} (${from} -> ${to})`);
    }
  }
  return [...out].sort();
}

describe("the import graph", () => {
  let tree: DependencyTree;

  beforeAll(async () => {
    tree = await parseDependencyTree(sources, {
      context: root,
      cwd: root,
      transform: false,
      tsconfig: resolve(root, "tsconfig.json"),
    });
  }, 120_000);

  it("reads the shipped source, type-only imports included", () => {
    const files = Object.keys(tree);
    expect(files).toContain("packages/runtime/src/server.ts");
    expect(files).toContain("services/gateway/src/http/context.ts");
    // A type-only edge is in the graph (transform would drop it).
    const context = tree["services/gateway/src/http/context.ts"] ?? [];
    expect(context.some((d) => d.id === "services/gateway/src/quota/admission.ts")).toBe(true);
  });

  it("has no import cycle", () => {
    expect(cyclesOf(tree).map((cycle) => cycle.join(" -> "))).toEqual([]);
  });

  it("has no import from one service's package into another's (but the listed ones)", () => {
    expect(boundaryViolations(tree)).toEqual([]);
  });

  it("keeps every shared package to its arrows (docs/architecture.md, Map)", () => {
    expect(arrowViolations(tree)).toEqual([]);
    // Every package of the tree is in the table, so a new one needs its arrows.
    const packages = new Set(
      Object.keys(tree)
        .map(unitOf)
        .filter((u) => u?.startsWith("packages/")),
    );
    expect([...packages].sort()).toEqual(Object.keys(packageArrows).sort());
  });

  it("still needs every listed exception (remove an entry once its imports are gone)", () => {
    const used = allowedAcrossServices.filter((a) =>
      boundaryViolations(tree, []).some((v) => {
        const [issuer, target] = v.split(" -> ");
        return issuer?.startsWith(`${a.from}/`) && target?.startsWith(`${a.to}/`);
      }),
    );
    expect(used).toEqual(allowedAcrossServices);
  });
});

describe("the tests' and benchmarks' imports", () => {
  let tree: DependencyTree;

  beforeAll(async () => {
    tree = await parseDependencyTree(testSources, {
      context: root,
      cwd: root,
      transform: false,
      tsconfig: resolve(root, "tsconfig.json"),
    });
  }, 120_000);

  it("reads the tests and the benchmarks", () => {
    const files = Object.keys(tree);
    expect(files).toContain("bench/receipts-turn.ts");
    expect(files).toContain("services/receipts/test/replay-receipts.test.ts");
    expect(files).toContain("test/import-graph.test.ts");
  });

  it("reach another unit's src/ or test/ only through its package (but the listed ones)", () => {
    expect(internalsViolations(tree)).toEqual([]);
  });

  it("still need every listed exception (remove an entry once its imports are gone)", () => {
    const found = internalsViolations(tree, []);
    const used = allowedIntoInternals.filter((a) =>
      found.some((v) => {
        const [issuer, target] = v.split(" -> ");
        return issuer?.startsWith(`${a.from}/`) && target?.startsWith(`${a.to}/`);
      }),
    );
    expect(used).toEqual(allowedIntoInternals);
  });
});

describe("the checks themselves", () => {
  const dep = (issuer: string, id: string) => ({
    issuer,
    request: id,
    kind: "StaticImport" as Dependency["kind"],
    id,
  });

  it("find a cycle, type-only or not", () => {
    const tree: DependencyTree = {
      "a.ts": [dep("a.ts", "b.ts")],
      "b.ts": [dep("b.ts", "a.ts")],
    };
    expect(cyclesOf(tree)).toEqual([["a.ts", "b.ts"]]);
  });

  it("find an import into another service or from a shared package into a service", () => {
    const tree: DependencyTree = {
      "services/chat/src/x.ts": [dep("services/chat/src/x.ts", "services/gateway/src/index.ts")],
      "packages/storage/src/y.ts": [
        dep("packages/storage/src/y.ts", "services/tasks/src/index.ts"),
      ],
      "services/tasks/src/z.ts": [
        dep("services/tasks/src/z.ts", "services/adapters/src/index.ts"),
        dep("services/tasks/src/z.ts", "packages/runtime/src/index.ts"),
        dep("services/tasks/src/z.ts", "services/tasks/src/w.ts"),
      ],
      "src/services.ts": [dep("src/services.ts", "services/chat/src/index.ts")],
    };
    expect(boundaryViolations(tree)).toEqual([
      "packages/storage/src/y.ts -> services/tasks/src/index.ts (services/tasks/src/index.ts)",
      "services/chat/src/x.ts -> services/gateway/src/index.ts (services/gateway/src/index.ts)",
      "services/tasks/src/z.ts -> services/adapters/src/index.ts (services/adapters/src/index.ts)",
    ]);
    // A listed exception lets its imports through.
    expect(
      boundaryViolations(tree, [{ from: "services/tasks", to: "services/adapters" }]),
    ).not.toContain(
      "services/tasks/src/z.ts -> services/adapters/src/index.ts (services/adapters/src/index.ts)",
    );
  });
  it("find a test's or benchmark's relative import into another unit's src/ or test/", () => {
    const bench = "bench/receipts-turn.ts";
    const test = "services/receipts/test/replay-receipts.test.ts";
    const tree: DependencyTree = {
      [bench]: [
        {
          ...dep(bench, "services/receipts/src/consumer.ts"),
          request: "../services/receipts/src/consumer.js",
        },
        {
          ...dep(bench, "services/receipts/test/support.ts"),
          request: "../services/receipts/test/support.js",
        },
        {
          ...dep(bench, "test/tracing/otlp-receiver.ts"),
          request: "../test/tracing/otlp-receiver.js",
        },
        // Through a package's entry points, or within the benchmarks: allowed.
        {
          ...dep(bench, "services/receipts/src/testing/index.ts"),
          request: "@trellis/receipts/testing",
        },
        { ...dep(bench, "bench/lib/proc.ts"), request: "./lib/proc.js" },
      ],
      [test]: [
        {
          ...dep(test, "services/tasks/test/support/harness.ts"),
          request: "../../tasks/test/support/harness.js",
        },
        { ...dep(test, "services/tasks/src/index.ts"), request: "@trellis/tasks" },
        // Its own service's source and support: allowed.
        { ...dep(test, "services/receipts/src/index.ts"), request: "../src/index.js" },
        { ...dep(test, "services/receipts/test/support.ts"), request: "./support.js" },
      ],
      // The root app's tests reach its source and the benchmarks' modules.
      "test/bench-ab.test.ts": [
        { ...dep("test/bench-ab.test.ts", "src/services.ts"), request: "../src/services.js" },
        {
          ...dep("test/bench-ab.test.ts", "bench/turn-ab.bench.ts"),
          request: "../bench/turn-ab.bench.js",
        },
      ],
      // Shipped source is the other rules' business.
      "services/chat/src/x.ts": [
        {
          ...dep("services/chat/src/x.ts", "services/gateway/src/y.ts"),
          request: "../../gateway/src/y.js",
        },
      ],
    };
    expect(internalsViolations(tree, [])).toEqual([
      "bench/receipts-turn.ts -> services/receipts/src/consumer.ts (../services/receipts/src/consumer.js)",
      "bench/receipts-turn.ts -> services/receipts/test/support.ts (../services/receipts/test/support.js)",
      "bench/receipts-turn.ts -> test/tracing/otlp-receiver.ts (../test/tracing/otlp-receiver.js)",
      "services/receipts/test/replay-receipts.test.ts -> services/tasks/test/support/harness.ts (../../tasks/test/support/harness.js)",
    ]);
    // A listed exception lets its imports through.
    expect(internalsViolations(tree, [{ from: "bench", to: "test" }])).not.toContain(
      "bench/receipts-turn.ts -> test/tracing/otlp-receiver.ts (../test/tracing/otlp-receiver.js)",
    );
  });

  it("find an import between packages that no arrow allows", () => {
    const tree: DependencyTree = {
      "packages/runtime/src/a.ts": [
        dep("packages/runtime/src/a.ts", "packages/contracts/src/index.ts"),
        dep("packages/runtime/src/a.ts", "packages/storage/src/index.ts"),
      ],
    };
    expect(arrowViolations(tree)).toEqual([
      "packages/runtime/src/a.ts -> packages/storage/src/index.ts (packages/runtime -> packages/storage)",
    ]);
  });
});
