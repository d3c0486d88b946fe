// A2A reads count against the caller's read rate (429 with Retry-After past
// it), like REST reads; the JSON-RPC body is bounded (413).

import { harnClient } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { postA2aRpc } from "@trellis/testkit/a2a-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { startGatewayWithTasks } from "./support/embedded.js";

describe("A2A limits", () => {
  let trellis: EmbeddedTrellis;
  let key: string;

  beforeAll(async () => {
    trellis = await startGatewayWithTasks(ADMIN_KEY, {
      TRELLIS_RATE_LIMIT_READS: "3/1m",
      TRELLIS_MAX_BODY_BYTES: "4096",
    });
    const created = await harnClient(trellis.address.url, ADMIN_KEY).post("/v1/api-keys", {
      name: "a2a-reader",
      scopes: ["tasks:read"],
    });
    key = created.json.key;
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  const rpc = (body: string) => postA2aRpc(`${trellis.address.url}/a2a/agent_echo`, body, key);

  it("refuses reads past the read rate and bodies past the limit", async () => {
    const getTask = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "GetTask",
      params: { id: "task_none" },
    });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await rpc(getTask)).status);
    // Not found is a JSON-RPC answer (200) while the rate allows; then 429.
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const refused = await rpc(getTask);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    const big = await rpc(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "GetTask",
        params: { id: "x".repeat(8000) },
      }),
    );
    expect(big.status).toBe(413);
  });
});
