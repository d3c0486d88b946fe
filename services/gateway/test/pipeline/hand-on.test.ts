import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import type { MeshCredentials } from "@trellis/platform";
import { describe, expect, it } from "vitest";
import { type HandOnPorts, handOnStage } from "../../src/http/pipeline/hand-on.js";
import { exchangeOf, recorder, route } from "./support.js";

const caller = { actorId: "key_1", workspaceId: "default", scopes: ["receipts:read"] };
const mesh = { sign: () => "signed" } as unknown as MeshCredentials;
const config = { TRELLIS_UPSTREAM_TIMEOUT: 10_000, TRELLIS_MAX_BODY_BYTES: 1024 };

function delegated(checked: string[]) {
  return route({
    path: "/v1/receipts/{receipt_id}",
    scope: "receipts:read",
    delegateTo: "receipts",
    beforeHandOn: async (call) => {
      checked.push(call.caller.actorId);
    },
  });
}

describe("stage hand-on", () => {
  it("passes a route served here on", async () => {
    const { next, reached } = recorder();
    const ports: HandOnPorts = { mode: "embedded", mesh, env: {}, config };
    await handOnStage(ports)(next)(exchangeOf(route()));
    expect(reached).toHaveLength(1);
  });

  it("embedded: checks, stamps the caller on the request and leaves it to the owner", async () => {
    const { next, reached } = recorder();
    const checked: string[] = [];
    const exchange = exchangeOf(delegated(checked), {
      headers: { "x-trellis-actor": "forged" },
    });
    exchange.call.caller = caller;
    const outcome = await handOnStage({ mode: "embedded", mesh, env: {}, config })(next)(exchange);
    expect(outcome).toBeUndefined();
    expect(exchange.handedOn).toBe(true);
    expect(checked).toEqual(["key_1"]);
    expect(reached).toHaveLength(0);
    const headers = exchange.call.req.headers;
    expect(Object.values(headers)).toContain("key_1");
    expect(Object.values(headers)).not.toContain("forged");
  });

  it("distributed: forwards the request to the owning service and returns its answer", async () => {
    let seen: { url?: string; headers?: IncomingHttpHeaders } = {};
    const server = createServer((req, res) => {
      seen = { url: req.url, headers: req.headers };
      res.writeHead(200, { "content-type": "application/json" }).end('{"receipt":true}');
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const env = { TRELLIS_RECEIPTS_URL: `http://127.0.0.1:${port}` };
      const { next, reached } = recorder();
      const checked: string[] = [];
      const exchange = exchangeOf(delegated(checked), { url: "/v1/receipts/rcp_1" });
      exchange.call.caller = caller;
      const outcome = await handOnStage({ mode: "distributed", mesh, env, config })(next)(exchange);
      expect(outcome?.status).toBe(200);
      const body = outcome?.body;
      expect(typeof body === "string" ? body : Buffer.from(body ?? "").toString()).toBe(
        '{"receipt":true}',
      );
      expect(exchange.handedOn).toBe(false);
      expect(checked).toEqual(["key_1"]);
      expect(reached).toHaveLength(0);
      expect(seen.url).toBe("/v1/receipts/rcp_1");
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
