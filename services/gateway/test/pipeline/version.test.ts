import { describe, expect, it } from "vitest";
import { currentProtocolVersion, protocolVersionHeader } from "../../src/domain/protocol.js";
import { versionStage } from "../../src/http/pipeline/version.js";
import { errorOf, exchangeOf, recorder, route } from "./support.js";

describe("stage version", () => {
  it("passes a supported version on", async () => {
    const { next, reached } = recorder();
    const headers = { [protocolVersionHeader]: currentProtocolVersion };
    expect((await versionStage(next)(exchangeOf(route(), { headers })))?.status).toBe(200);
    expect(reached).toHaveLength(1);
  });

  it("answers 426 for a missing or unknown version, naming the supported ones", async () => {
    const { next, reached } = recorder();
    const missing = errorOf(await versionStage(next)(exchangeOf(route())));
    expect(missing).toMatchObject({ status: 426, code: "unsupported_protocol_version" });
    expect(String(missing.body.message)).toContain("is required");
    const headers = { [protocolVersionHeader]: "agents-protocol-1999-01-01" };
    const unknown = errorOf(await versionStage(next)(exchangeOf(route(), { headers })));
    expect(unknown.status).toBe(426);
    expect(unknown.body.details).toEqual({ supported_versions: [currentProtocolVersion] });
    expect(reached).toHaveLength(0);
  });

  it("does not ask a public route for a version", async () => {
    const { next, reached } = recorder();
    await versionStage(next)(exchangeOf(route({ scope: "public" })));
    expect(reached).toHaveLength(1);
  });
});
