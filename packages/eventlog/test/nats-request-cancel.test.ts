// nats.js ends every successful request with cancel(), which built a new
// RequestError (an Error with its stack) only to reject an already resolved
// promise; connection.ts makes a cancel without a reason use one shared error.
import { RequestOne } from "@nats-io/transport-node/lib/nats-base-client.js";
import { describe, expect, it } from "vitest";
import "../src/jetstream/connection.js";

type Request = {
  deferred: Promise<unknown>;
  resolver(err: Error | null, msg: unknown): void;
  cancel(err?: Error): void;
};
const newRequest = (): Request => {
  const mux = { cancel() {} };
  return new (RequestOne as unknown as new (...args: unknown[]) => Request)(
    mux,
    "subject",
    { timeout: 60_000 },
    false,
  );
};

describe("nats.js RequestOne.cancel", () => {
  it("resolves a request that succeeded, and cancels without building an error", async () => {
    const ok = newRequest();
    ok.resolver(null, "reply");
    await expect(ok.deferred).resolves.toBe("reply");

    const a = newRequest();
    const b = newRequest();
    a.cancel();
    b.cancel();
    const [ea, eb] = await Promise.all([a.deferred.catch((e) => e), b.deferred.catch((e) => e)]);
    expect(ea).toBeInstanceOf(Error);
    expect((ea as Error).message).toBe("cancelled");
    expect(ea).toBe(eb);

    // A reason given is kept.
    const c = newRequest();
    const reason = new Error("closed");
    c.cancel(reason);
    await expect(c.deferred).rejects.toBe(reason);
  });
});
