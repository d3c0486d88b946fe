/**
 * Issue 22, finding 9: a client that goes away in the middle of its request
 * body is logged at debug, not as a server error.
 */
import { connect } from "node:net";
import { createLogger, createService, type TrellisService } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Authenticator } from "../src/auth/authenticator.js";
import { loadGatewayConfig } from "../src/config.js";
import type { GatewayDeps, RouteSpec } from "../src/http/context.js";
import { jsonResponse } from "../src/http/io.js";
import { createRestHandler } from "../src/http/rest-handler.js";

const authenticator: Authenticator = {
  async authenticate() {
    return {
      ok: true,
      caller: { actorId: "key_1", workspaceId: "default", scopes: ["*"] },
      credential: { kind: "api_key", keyId: "key_1" },
    };
  },
};

describe("a client that aborts its request", () => {
  const lines: { level: string; msg: string }[] = [];
  let service: TrellisService;
  let port: number;

  beforeAll(async () => {
    const logger = createLogger({
      service: "gateway",
      level: "debug",
      write: (chunk) => {
        for (const line of chunk.split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      },
    });
    const env = {};
    const routes: RouteSpec[] = [
      {
        method: "POST",
        path: "/v1/sessions",
        scope: "sessions:write",
        handle: async () => jsonResponse(200, {}),
      },
    ];
    const deps = {
      authenticator,
      config: loadGatewayConfig(env),
      logger,
      closing: new AbortController().signal,
      startedAt: new Date(),
      mode: "embedded",
      env,
    } as unknown as GatewayDeps;
    service = createService({
      name: "gateway",
      env,
      logger,
      http: createRestHandler(deps, routes),
    });
    const { url } = await service.listen({ host: "127.0.0.1", port: 0 });
    port = Number(new URL(url).port);
  });

  afterAll(() => service?.close({ graceMs: 200 }));

  it("is logged below error level when it leaves in the middle of the body", async () => {
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.write(
          "POST /v1/sessions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer k\r\n" +
            "harn-agents-protocol-version: agents-protocol-2026-04-25\r\n" +
            'content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"a":',
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 100);
      });
      socket.on("error", reject);
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(lines.filter((l) => l.level === "error")).toEqual([]);
    expect(lines.map((l) => l.msg)).toContain("rest request abandoned by the client");
  });
});
