// Progress of long CLI work: a spinner line rewritten in place on a terminal,
// plain lines (no control characters) anywhere else.
import { describe, expect, it } from "vitest";
import { createProgress } from "../src/cli/progress.js";

// Carriage return or escape: what only a terminal should get.
const hasControl = (text: string) => text.includes("\r") || text.includes("\u001b");

function stream(isTTY: boolean) {
  const chunks: string[] = [];
  const fake = {
    isTTY,
    write: (chunk: string) => {
      chunks.push(chunk);
      return true;
    },
  } as unknown as NodeJS.WriteStream;
  return { fake, text: () => chunks.join("") };
}

describe("CLI progress", () => {
  it("writes plain lines when not on a terminal", () => {
    const { fake, text } = stream(false);
    const step = createProgress(fake, {}).start("Starting the mesh");
    step.update("1/6 ready");
    step.update("1/6 ready");
    step.done();
    step.fail();
    const lines = text().trimEnd().split("\n");
    expect(lines[0]).toBe("Starting the mesh…");
    expect(lines[1]).toBe("Starting the mesh: 1/6 ready");
    expect(lines[2]).toMatch(/^Starting the mesh: done \(\d+\.\d s\)$/);
    expect(lines).toHaveLength(3);
    expect(hasControl(text())).toBe(false);
  });

  it("animates one line on a terminal and ends it with a mark", () => {
    const { fake, text } = stream(true);
    const step = createProgress(fake, {}).start("Migrating");
    step.update("gateway");
    step.fail("tasks");
    expect(text()).toContain("\r\x1b[2K");
    expect(text()).toMatch(/✗ Migrating — tasks \(\d+\.\d s\)\n$/);
  });

  it("stays plain on a terminal when CI or NO_COLOR says so", () => {
    for (const env of [{ CI: "true" }, { NO_COLOR: "1" }, { TERM: "dumb" }]) {
      const { fake, text } = stream(true);
      createProgress(fake, env).start("Starting").done();
      expect(hasControl(text())).toBe(false);
    }
  });
});
