import { describe, expect, it } from "vitest";
import type { AuthResult } from "../src/auth/authenticator.js";
import { CredentialChecks } from "../src/feed/credential-checks.js";

/** An authenticator whose answer the test sets, counting lookups. */
function scripted(initial: AuthResult | Error) {
  const state = { answer: initial, lookups: 0 };
  return {
    state,
    authenticator: {
      async authenticate(): Promise<AuthResult> {
        state.lookups++;
        await new Promise((resolve) => setTimeout(resolve, 5));
        if (state.answer instanceof Error) throw state.answer;
        return state.answer;
      },
    },
  };
}

const valid: AuthResult = {
  ok: true,
  caller: { actorId: "a", workspaceId: "default", scopes: ["events:read"] },
  credential: { kind: "api_key", keyId: "key_1" },
};

describe("CredentialChecks", () => {
  it("shares one lookup among the streams of a credential, and sees a revocation after maxAge", async () => {
    const { state, authenticator } = scripted(valid);
    const checks = new CredentialChecks(authenticator, 50);
    const results = await Promise.all(
      Array.from({ length: 100 }, () => checks.refusal("Bearer k1")),
    );
    expect(results.every((r) => r === undefined)).toBe(true);
    expect(state.lookups).toBe(1);
    await checks.refusal("Bearer k2");
    expect(state.lookups).toBe(2);

    state.answer = { ok: false, failure: "invalid" };
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(await checks.refusal("Bearer k1")).toBe("invalid");
    expect(state.lookups).toBe(3);
  });

  it("keeps streams open when the credential cannot be checked now", async () => {
    const { state, authenticator } = scripted({ ok: false, failure: "unavailable" });
    const checks = new CredentialChecks(authenticator, 0);
    expect(await checks.refusal("Bearer jwt")).toBeUndefined();
    state.answer = new Error("database down");
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await checks.refusal("Bearer jwt")).toBeUndefined();
    state.answer = { ok: false, failure: "expired" };
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await checks.refusal("Bearer jwt")).toBe("expired");
  });
});
