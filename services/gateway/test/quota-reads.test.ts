// Read rate limits (TRELLIS_RATE_LIMIT_READS): reads of an actor — REST GETs
// and read RPCs alike — are counted in a bucket of their own; past the limit
// they are 429 rate_limited with Retry-After, while the actor's writes and
// other actors' reads go on.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService } from "@trellis/contracts/tasks";
import { harnClient } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { errorDetailOf } from "@trellis/runtime";
import { bearer } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadLimitsConfig } from "../src/quota/config.js";
import { startGatewayWithTasks } from "./support/embedded.js";

const ADMIN_KEY = "trellis-read-limit-admin-key-0123456789";
const READS = 5;

describe("read rate limits", () => {
  let trellis: EmbeddedTrellis;
  let admin: ReturnType<typeof harnClient>;

  beforeAll(async () => {
    trellis = await startGatewayWithTasks(ADMIN_KEY, { TRELLIS_RATE_LIMIT_READS: `${READS}/1h` });
    admin = harnClient(trellis.address.url, ADMIN_KEY);
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  async function newKey(): Promise<string> {
    const made = await admin.post("/v1/api-keys", {
      name: `reader-${Math.random().toString(36).slice(2, 8)}`,
      scopes: ["sessions:read", "sessions:write"],
    });
    expect(made.status).toBe(201);
    return made.json.key;
  }

  it("defaults to a generous limit, and can be turned off", () => {
    expect(loadLimitsConfig({}).reads).toEqual({ limit: 30_000, periodMs: 60_000 });
    // Read counts are written behind every 100 ms unless told otherwise (0: every read at once).
    expect(loadLimitsConfig({}).readsFlushMs).toBe(100);
    expect(loadLimitsConfig({ TRELLIS_RATE_LIMIT_READS_FLUSH: "0" }).readsFlushMs).toBe(0);
    expect(loadLimitsConfig({ TRELLIS_RATE_LIMIT_READS_FLUSH: "2s" }).readsFlushMs).toBe(2_000);
    expect(() => loadLimitsConfig({ TRELLIS_RATE_LIMIT_READS_FLUSH: "1m" })).toThrow(
      /TRELLIS_RATE_LIMIT_READS_FLUSH/,
    );
    // Write counts: behind only where the gateway is the only replica (embedded).
    expect(loadLimitsConfig({}).writesFlushMs).toBe(0);
    // The only replica (embedded) writes both behind once a second.
    expect(loadLimitsConfig({}, { onlyReplica: true }).writesFlushMs).toBe(1_000);
    expect(loadLimitsConfig({}, { onlyReplica: true }).readsFlushMs).toBe(1_000);
    expect(
      loadLimitsConfig({ TRELLIS_RATE_LIMIT_READS_FLUSH: "100ms" }, { onlyReplica: true })
        .readsFlushMs,
    ).toBe(100);
    expect(
      loadLimitsConfig({ TRELLIS_RATE_LIMIT_WRITES_FLUSH: "0" }, { onlyReplica: true })
        .writesFlushMs,
    ).toBe(0);
    expect(() => loadLimitsConfig({ TRELLIS_RATE_LIMIT_WRITES_FLUSH: "soon" })).toThrow(
      /TRELLIS_RATE_LIMIT_WRITES_FLUSH/,
    );
    // Exact write counters grant from blocks of at most 64 units by default.
    expect(loadLimitsConfig({}).writesBlock).toBe(64);
    expect(loadLimitsConfig({ TRELLIS_RATE_LIMIT_BLOCK: "1" }).writesBlock).toBe(1);
    for (const bad of ["0", "x", "10001", "2.5", ""]) {
      expect(() => loadLimitsConfig({ TRELLIS_RATE_LIMIT_BLOCK: bad })).toThrow(
        /TRELLIS_RATE_LIMIT_BLOCK must be a whole number/,
      );
    }
    expect(loadLimitsConfig({ TRELLIS_RATE_LIMIT_READS: "off" }).reads).toBeUndefined();
    expect(() => loadLimitsConfig({ TRELLIS_RATE_LIMIT_READS: "lots" })).toThrow(
      /TRELLIS_RATE_LIMIT_READS/,
    );
  });

  it("answers REST reads past the limit with 429 and Retry-After; writes still pass", async () => {
    const reader = harnClient(trellis.address.url, await newKey());
    const statuses: number[] = [];
    for (let i = 0; i < READS; i++) statuses.push((await reader.get("/v1/sessions")).status);
    expect(statuses).toEqual(Array(READS).fill(200));
    const refused = await reader.get("/v1/sessions");
    expect(refused.status).toBe(429);
    expect(refused.json.error.code).toBe("rate_limited");
    expect(refused.json.error.details).toMatchObject({ scope: "reads", limit: READS });
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    // Writes have their own rates; another actor's reads are not affected.
    expect((await reader.post("/v1/sessions", {})).status).toBe(201);
    expect((await harnClient(trellis.address.url, await newKey()).get("/v1/sessions")).status).toBe(
      200,
    );
  });

  it("counts read RPCs in the same bucket (ResourceExhausted)", async () => {
    const key = await newKey();
    const sessions = createClient(
      SessionService,
      createGrpcTransport({
        baseUrl: trellis.address.url,
        interceptors: [bearer(key)],
      }),
    );
    for (let i = 0; i < READS - 1; i++) await sessions.listSessions({ workspaceId: "default" });
    // The REST read and the RPCs share the actor's read budget.
    expect((await harnClient(trellis.address.url, key).get("/v1/sessions")).status).toBe(200);
    const failure = ConnectError.from(
      await sessions.listSessions({ workspaceId: "default" }).catch((e: unknown) => e),
    );
    expect(failure.code).toBe(Code.ResourceExhausted);
    expect(errorDetailOf(failure)?.reason).toBe("rate_limited");
  });
});
