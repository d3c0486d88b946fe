import { createLogger } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { jsonResponse } from "../../src/http/io.js";
import {
  idempotencyStage,
  isReplayable,
  runIdempotent,
} from "../../src/http/pipeline/idempotency.js";
import type { Outcome } from "../../src/http/pipeline/stage.js";
import type {
  ClaimResult,
  IdempotencyScope,
  IdempotencyStore,
  StoredResponse,
} from "../../src/store/idempotency-store.js";
import { errorOf, exchangeOf, recorder, route } from "./support.js";

/** The store's contract in memory: one record per scope. */
function memoryStore(): IdempotencyStore & { records: Map<string, Entry> } {
  const records = new Map<string, Entry>();
  const keyOf = (scope: IdempotencyScope) => JSON.stringify(scope);
  return {
    records,
    async claim(scope, requestHash): Promise<ClaimResult> {
      const key = keyOf(scope);
      const record = records.get(key);
      if (record === undefined) {
        records.set(key, { requestHash, response: undefined });
        return { kind: "claimed", claim: { scopeHash: key, owner: "me" } };
      }
      if (record.requestHash !== requestHash) return { kind: "mismatch" };
      return record.response
        ? { kind: "replay", response: record.response }
        : { kind: "in_flight" };
    },
    async complete(claim, response) {
      const record = records.get(claim.scopeHash);
      if (record) record.response = response;
      return true;
    },
    async release(claim) {
      records.delete(claim.scopeHash);
    },
    async prune() {
      return 0;
    },
  };
}
interface Entry {
  requestHash: string;
  response: StoredResponse | undefined;
}

const caller = { actorId: "key_1", workspaceId: "default", scopes: ["sessions:write"] };
const config = {
  TRELLIS_IDEMPOTENCY_WAIT: 0,
  TRELLIS_IDEMPOTENCY_LEASE: 60_000,
  TRELLIS_IDEMPOTENCY_TTL: 60_000,
};

function setUp(outcome: Outcome = jsonResponse(201, { id: "ses_1" })) {
  const store = memoryStore();
  const ports = {
    idempotency: store,
    config,
    logger: createLogger({ service: "gateway", level: "error", write: () => {} }),
    closing: new AbortController().signal,
  };
  const stage = idempotencyStage(ports);
  const { next, reached } = recorder(outcome);
  const send = (key: string | undefined, body: unknown, write = true, requestId = "req_1") => {
    const exchange = exchangeOf(route({ method: "POST", path: "/v1/sessions", write }), {
      url: "/v1/sessions",
      headers: key === undefined ? {} : { "idempotency-key": key },
    });
    exchange.call.caller = caller;
    exchange.call.body = body as never;
    Object.assign(exchange.call, { requestId });
    return { exchange, outcome: stage(next)(exchange) };
  };
  /** A WebSocket command frame with `idempotency_key` for the same target. */
  const command = (key: string, body: unknown) => {
    const exchange = exchangeOf(route({ method: "POST", path: "/v1/sessions", write: true }), {
      url: "/v1/sessions",
    });
    exchange.call.caller = caller;
    exchange.call.body = body as never;
    return runIdempotent(
      ports,
      {
        call: exchange.call,
        method: "POST",
        target: "/v1/sessions",
        key,
        param: "idempotency_key",
      },
      () => next(exchange),
    );
  };
  return { store, reached, send, command };
}

describe("stage idempotency", () => {
  it("runs a write once and replays its response to an equivalent retry", async () => {
    const { reached, send } = setUp();
    const first = send("k-1", { a: 1 });
    expect((await first.outcome)?.status).toBe(201);
    expect(first.exchange.call.idempotencyKey).toMatch(/^idem_/);
    const retry = send("k-1", { a: 1 }, true, "req_2");
    const replayed = await retry.outcome;
    expect(replayed?.status).toBe(201);
    expect(replayed?.headers["idempotent-replayed"]).toBe("true");
    expect(retry.exchange.call.idempotencyKey).toBe(first.exchange.call.idempotencyKey);
    expect(reached).toHaveLength(1);
  });

  it("refuses the same key with another body (409 idempotency_key_reused)", async () => {
    const { send } = setUp();
    await send("k-1", { a: 1 }).outcome;
    await expect(send("k-1", { a: 2 }).outcome).rejects.toMatchObject({
      reason: "idempotency_key_reused",
    });
  });

  it("answers 409 conflict with Retry-After while the first request still runs", async () => {
    const { store, send, reached } = setUp();
    const first = send("k-1", { a: 1 });
    await first.outcome;
    // Make it look unfinished again.
    for (const record of store.records.values()) record.response = undefined;
    const retry = await send("k-1", { a: 1 }).outcome;
    expect(errorOf(retry)).toMatchObject({ status: 409, code: "conflict" });
    expect(retry?.headers["retry-after"]).toBe("1");
    expect(reached).toHaveLength(1);
  });

  it("releases the key after a transient failure, so a retry runs again", async () => {
    const { store, send, reached } = setUp(jsonResponse(429, { error: { code: "rate_limited" } }));
    expect((await send("k-1", {}).outcome)?.status).toBe(429);
    expect(store.records.size).toBe(0);
    await send("k-1", {}).outcome;
    expect(reached).toHaveLength(2);
    expect(isReplayable(429)).toBe(false);
    expect(isReplayable(404)).toBe(true);
    expect(isReplayable(503)).toBe(false);
  });

  it("replays a stored error with the current request's id", async () => {
    const { send } = setUp(
      jsonResponse(404, { error: { code: "resource_not_found", request_id: "req_1" } }),
    );
    await send("k-1", {}).outcome;
    const replayed = await send("k-1", {}, true, "req_2").outcome;
    expect(errorOf(replayed).body.request_id).toBe("req_2");
  });

  it("leaves writes without a key, and reads, alone", async () => {
    const { store, send, reached } = setUp();
    await send(undefined, {}).outcome;
    await send("k-1", {}, false).outcome;
    expect(reached).toHaveLength(2);
    expect(store.records.size).toBe(0);
  });

  it("refuses a key that is not 1–255 printable ASCII characters", async () => {
    const { send, reached } = setUp();
    for (const key of ["", "k".repeat(256), "ключ"]) {
      await expect(send(key, {}).outcome).rejects.toMatchObject({
        reason: "invalid_request",
        param: "Idempotency-Key",
      });
    }
    expect(reached).toHaveLength(0);
  });

  it("shares keys with WebSocket commands of the same target, in their own words", async () => {
    const { reached, send, command } = setUp();
    await send("k-1", { a: 1 }).outcome;
    const replayed = await command("k-1", { a: 1 });
    expect(replayed.headers["idempotent-replayed"]).toBe("true");
    await expect(command("k-1", { a: 2 })).rejects.toMatchObject({
      reason: "idempotency_key_reused",
      param: "idempotency_key",
      message: "this idempotency_key was already used with a different command",
    });
    expect(reached).toHaveLength(1);
  });
});
