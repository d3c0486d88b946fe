// Hostile JSON-RPC bodies on /a2a (issue 22 leftovers, found by the fuzz
// shapes): a body past the structure limits is refused before the SDK parses
// it, ids and NUL are checked like RPC fields, and failed credentials here
// count against the per-source throttle like everywhere else.
import type { EmbeddedTrellis } from "@trellis/platform";
import { postA2aRpc } from "@trellis/testkit/a2a-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { startGatewayWithTasks } from "./support/embedded.js";

describe("A2A hostile bodies", () => {
  let trellis: EmbeddedTrellis;

  beforeAll(async () => {
    trellis = await startGatewayWithTasks(ADMIN_KEY, { TRELLIS_AUTH_FAILURES_PER_SOURCE: "3" });
  }, 240_000);
  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  const rpc = (body: string, key = ADMIN_KEY) =>
    postA2aRpc(`${trellis.address.url}/a2a/agent_echo`, body, key);
  const send = (message: Record<string, unknown>) =>
    JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "SendMessage",
      params: {
        message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }], ...message },
      },
    });

  async function refused(res: Response, param: string | RegExp): Promise<void> {
    const text = await res.text();
    expect(res.status, text).toBe(400);
    const body = JSON.parse(text) as { error: { code: string; param?: string } };
    expect(body.error.code).toBe("invalid_request");
    expect(body.error.param).toMatch(param);
  }

  it("refuses structure past the limits, naming the field", async () => {
    const keys = `{${Array.from({ length: 1_001 }, (_, i) => `"k${i}":1`).join(",")}}`;
    await refused(
      await rpc(
        `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":${keys}}}}`,
      ),
      "params.message.metadata",
    );
    await refused(
      await rpc(
        `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"metadata":${'{"a":'.repeat(200)}1${"}".repeat(200)}}}`,
      ),
      /^params\.metadata/,
    );
  });

  it("refuses NUL anywhere and oversized ids in params", async () => {
    await refused(await rpc(send({ messageId: "m\u0000" })), "params.message.messageId");
    await refused(await rpc(send({ contextId: "c".repeat(513) })), "params.message.contextId");
    await refused(
      await rpc(
        JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "GetTask",
          params: { id: "t".repeat(513) },
        }),
      ),
      "params.id",
    );
    await refused(
      await rpc(send({ metadata: { note: "a\u0000" } })),
      "params.message.metadata.note",
    );
    // A 512-character id is fine: the task is simply not there.
    const missing = await rpc(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "t".repeat(512) } }),
    );
    expect(missing.status).toBe(200);
    expect(((await missing.json()) as { error?: { code: number } }).error?.code).toBeLessThan(
      -32000,
    );
  });

  it("counts failed credentials against the throttle", async () => {
    const get = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "t" } });
    for (let i = 0; i < 3; i++) expect((await rpc(get, `wrong-${i}`)).status).toBe(401);
    const throttled = await rpc(get, "wrong-again");
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
