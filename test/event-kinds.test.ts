/**
 * Every producer and consumer names event kinds through the catalogue
 * (`@trellis/contracts/event-kinds`): no catalogued kind is spelled as a
 * string literal in shipped source. Shared contract suites (`*.contract.ts`)
 * and test fixtures may spell kinds, to pin the wire names; comments may
 * too.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..");
const catalogue = "packages/contracts/src/event-kinds.ts";

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "gen" && entry.name !== "node_modules") out.push(...sourceFiles(path));
    } else if (
      entry.name.endsWith(".ts") &&
      !entry.name.endsWith(".contract.ts") &&
      !entry.name.endsWith(".test.ts")
    ) {
      out.push(path);
    }
  }
  return out;
}

function shippedSources(): string[] {
  const dirs = [join(root, "src")];
  for (const group of ["packages", "services"]) {
    for (const entry of readdirSync(join(root, group), { withFileTypes: true })) {
      if (entry.isDirectory()) dirs.push(join(root, group, entry.name, "src"));
    }
  }
  return dirs.flatMap((dir) => {
    try {
      return sourceFiles(dir);
    } catch {
      return []; // a package without src/
    }
  });
}

/** `file:line: "kind"` for each catalogued kind spelled as a literal. */
function bareKinds(files: readonly string[], kinds: ReadonlySet<string>): string[] {
  const found: string[] = [];
  for (const file of files) {
    const lines = readFileSync(file, "utf8").split("\n");
    lines.forEach((line, index) => {
      if (/^\s*(\/\/|\*|\/\*)/.test(line)) return;
      for (const match of line.matchAll(/["']([a-z]+\.[a-z_]+)["']/g)) {
        const kind = match[1] ?? "";
        if (kinds.has(kind)) found.push(`${relative(root, file)}:${index + 1}: "${kind}"`);
      }
    });
  }
  return found;
}

describe("event-kind catalogue in use", () => {
  const kinds = new Set<string>(Object.values(EVENT_KIND));

  it("finds a bare kind when one is there (the check can fail)", () => {
    expect(bareKinds([join(root, catalogue)], kinds).length).toBeGreaterThan(10);
  });

  it("no shipped source spells a catalogued kind as a string", () => {
    const files = shippedSources().filter((file) => relative(root, file) !== catalogue);
    expect(files.length).toBeGreaterThan(100);
    expect(bareKinds(files, kinds)).toEqual([]);
  });
});
