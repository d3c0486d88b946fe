// The packages' `defaults` entry points are what the CLI reads before it loads
// any service: each must stay a module of constants that imports nothing.
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..");

describe("light defaults entry points", () => {
  it.each(["eventlog", "platform", "storage"])(
    "@trellis/%s/defaults is exported and imports nothing",
    async (name) => {
      const manifest = JSON.parse(
        await readFile(resolve(root, "packages", name, "package.json"), "utf8"),
      ) as { exports: Record<string, string> };
      expect(manifest.exports["./defaults"]).toBe("./src/defaults.ts");
      const source = await readFile(resolve(root, "packages", name, "src", "defaults.ts"), "utf8");
      expect(source).not.toMatch(/^\s*(import|export \* from|export \{[^}]*\} from)\b/m);
      const module = (await import(`@trellis/${name}/defaults`)) as Record<string, unknown>;
      const values = Object.values(module);
      expect(values.length).toBeGreaterThan(0);
      for (const value of values) expect(typeof value).toBe("number");
    },
  );
});
