// Nothing tracked may read outside the checkout: CI and new users start from a
// fresh clone with nothing beside it (issue 19: receipts tests once read the
// spec from a folder beside the checkout and failed there). The detector is tested first on
// synthetic offenders, so a scan that finds nothing means something.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkoutFiles, checkoutRoot } from "./support/checkout.js";
import { type Escape, escapesRoot, findEscapes } from "./support/self-contained.js";

/** Not scanned: generated or third-party files, and this test's own synthetic offenders. */
const SKIPPED = [
  /^package-lock\.json$/,
  /^packages\/contracts\/src\/gen\//,
  /^clients\/[^/]+\/gen\//,
  /^services\/receipts\/test\/fixtures\/harn-receipts\//,
  /^test\/self-contained\.test\.ts$/,
];

/** Literals that look like escaping paths but are data (sent to Trellis, or synthetic imports), never read. */
const ALLOWED: readonly { file: string; text: string; why: string }[] = [
  {
    file: "test/fuzz/values.ts",
    text: "../../../../etc/passwd",
    why: "path-traversal input sent to the gateway",
  },
  { file: "test/fuzz/rpc-cases.ts", text: "../../../../", why: "a hostile x-request-id header" },
  {
    file: "test/import-graph.test.ts",
    text: "../../tasks/test/support/harness.js",
    why: "a synthetic import, as written in a service's test folder, for the import rules' own test",
  },
  {
    file: "test/import-graph.test.ts",
    text: "../../gateway/src/y.js",
    why: "a synthetic import, as written in a service's source folder, for the import rules' own test",
  },
];

// The offenders below are spelled in parts, so that this file holds none of the
// strings a plain text search for outside reads looks for.
const SIBLING = ["..", "shared"].join("/");
const SPEC_VARIABLE = ["TRELLIS", "SPEC", "DIR"].join("_");

const allowed = (e: Escape) => ALLOWED.some((a) => a.file === e.file && a.text === e.text);

describe("the detector", () => {
  it("resolves relative paths from the file's own folder", () => {
    expect(escapesRoot("services/receipts/test/support.ts", `../../../${SIBLING}/x`)).toBe(true);
    expect(escapesRoot("services/receipts/test/support.ts", "../../../")).toBe(false);
    expect(escapesRoot("services/adapters/test/support/processes.ts", "../../../..")).toBe(false);
    expect(escapesRoot("src/cli/main.ts", "../../..")).toBe(true);
    expect(escapesRoot("README.md", "../x")).toBe(true);
    expect(escapesRoot("src/cli/main.ts", "./x")).toBe(false);
  });

  it("finds the receipts spec read that once broke fresh clones", () => {
    const snippet = [
      `/** The shared spec (\`${SPEC_VARIABLE}\` overrides it). */`,
      `export const dir = process.env.${SPEC_VARIABLE}`,
      `  ? new URL(\`file://\${process.env.${SPEC_VARIABLE}}/harn/receipts/\`)`,
      `  : new URL("../../../${SIBLING}/spec/harn/receipts/", import.meta.url);`,
    ].join("\n");
    const found = findEscapes("services/receipts/test/support.ts", snippet);
    expect(found).toContainEqual({
      file: "services/receipts/test/support.ts",
      line: 4,
      text: `../../../${SIBLING}/spec/harn/receipts/`,
      rule: "escapes-root",
    });
    expect(found.map((e) => e.line)).toEqual([2, 3, 4]);
  });

  it("finds outside locations in code, scripts and Markdown", () => {
    expect(findEscapes("src/x.ts", 'readFileSync("/work/shared/STYLE.md");')).toHaveLength(1);
    expect(findEscapes("src/x.ts", `const p = join(root, "${SIBLING}/spec");`)).toHaveLength(1);
    expect(findEscapes("src/x.ts", 'const h = "/home/alice/spec";')).toHaveLength(1);
    expect(findEscapes(".ci/run", `export ${SPEC_VARIABLE}=$ROOT/${SIBLING}/spec`)).toHaveLength(1);
    expect(findEscapes("scripts/x.sh", "cp -r /work/shared/spec test/")).toHaveLength(1);
    expect(findEscapes("docs/a.md", `see [the spec](../${SIBLING}/spec/004.txt)`)).toHaveLength(2);
    expect(findEscapes("docs/a.md", "the plan ([here](../README.md))")).toEqual([]);
  });

  it("leaves comments, inside paths and unrelated words alone", () => {
    const code = [
      "// read shared/spec/README.md and /work/shared/STYLE.md by hand",
      'const root = new URL("../..", import.meta.url);',
      'const ok = "sharedSecret" + "/tmp/work/x" + "https://example.com/work/";',
    ].join("\n");
    expect(findEscapes("services/chat/src/x.ts", code)).toEqual([]);
    expect(findEscapes(".ci/run", `# no ${SIBLING} here, only in a comment`)).toEqual([]);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: shell text, not a template
    expect(findEscapes(".ci/run", 'echo "${#pkgs[@]}" /usr/lib/postgresql')).toEqual([]);
  });
});

describe("the checkout", () => {
  it("has no source, test, script or doc that reads outside it", () => {
    const files = checkoutFiles().filter((f) => !SKIPPED.some((s) => s.test(f)));
    // The scan is real: it sees the code, the tests, CI and the docs.
    for (const f of ["services/receipts/test/support.ts", ".ci/run", "README.md", "package.json"])
      expect(files).toContain(f);
    const found: Escape[] = [];
    for (const file of files) {
      const text = readFileSync(join(checkoutRoot, file), "utf8");
      if (text.includes("\0")) continue; // binary
      found.push(...findEscapes(file, text).filter((e) => !allowed(e)));
    }
    expect(found).toEqual([]);
  });

  it("still needs every allowed exception", () => {
    const stale = ALLOWED.filter(
      (a) =>
        !findEscapes(a.file, readFileSync(join(checkoutRoot, a.file), "utf8")).some(
          (e) => e.text === a.text,
        ),
    );
    expect(stale).toEqual([]);
  });
});
