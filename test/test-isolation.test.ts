// Test files share their vitest worker with the files run before them
// (`isolate: false`, vitest.config.ts); a file that installs process-wide
// state must run in a process of its own, or it sees (or leaves) another
// file's. This finds such files by what they call and checks each is in
// the config's `ownProcess` list, and that the list names no file that no
// longer needs it. The detector is tried on synthetic files first.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ownProcess } from "../vitest.config.js";
import { checkoutFiles, checkoutRoot } from "./support/checkout.js";

// Spelled in parts so this file does not match itself.
const MOCK = ["vi", "mock("].join(".");
const DO_MOCK = ["vi", "doMock("].join(".");
const TELEMETRY = ["init", "Telemetry("].join("");

/** Why `text` (a test file) needs a process of its own, or undefined. */
function needsOwnProcess(text: string): string | undefined {
  if (text.includes(MOCK) || text.includes(DO_MOCK)) {
    return "mocks a module other files import";
  }
  if (text.includes(TELEMETRY)) return "installs OpenTelemetry's global providers";
  return undefined;
}

describe("the detector", () => {
  it("finds module mocks and telemetry set-up, and nothing in a plain test", () => {
    expect(needsOwnProcess(`${MOCK}"node:dns", () => ({}));`)).toMatch(/mocks/);
    expect(needsOwnProcess(`await ${DO_MOCK}"../src/x.js");`)).toMatch(/mocks/);
    expect(needsOwnProcess(`const t = ${TELEMETRY}{ exporter: "memory" });`)).toMatch(
      /OpenTelemetry/,
    );
    expect(needsOwnProcess(`it("adds", () => expect(1 + 1).toBe(2));`)).toBeUndefined();
  });
});

describe("test files that need their own process", () => {
  const files = checkoutFiles().filter((file) => file.endsWith(".test.ts"));
  const needing = files
    .map((file) => ({ file, why: needsOwnProcess(readFileSync(join(checkoutRoot, file), "utf8")) }))
    .filter((entry) => entry.why !== undefined);

  it("are each listed in vitest.config.ts's ownProcess", () => {
    expect(files.length).toBeGreaterThan(100);
    const missing = needing.filter((entry) => !ownProcess.includes(entry.file));
    expect(missing, "add these to ownProcess in vitest.config.ts").toEqual([]);
  });

  it("and the list names only such files", () => {
    const needed = new Set(needing.map((entry) => entry.file));
    expect(ownProcess.filter((file) => !needed.has(file))).toEqual([]);
  });
});
