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
 * The graph is dpdm's (the lint's tool), read with `transform: false` so that
 * `import type` edges count.
 */
import { resolve } from "node:path";
import { type Dependency, type DependencyTree, parseCircular, parseDependencyTree } from "dpdm";
import { beforeAll, describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..");
const sources = ["src/**/*.ts", "packages/*/src/**/*.ts", "services/*/src/**/*.ts"];

/**
 * Known imports across services, each with why it is still there. Adding one
 * needs a reason here; removing one is progress.
 */
const allowedAcrossServices: readonly { from: string; to: string; why: string }[] = [];

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
