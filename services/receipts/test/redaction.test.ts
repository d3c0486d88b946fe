// Privacy and redaction (Harn v1): internal and receipt-only content never
// reaches an audience the policy excludes; secrets never appear at all;
// what is removed leaves a descriptor (kind, size, hash).
import { createHash } from "node:crypto";
import { create, fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { MessageSchema, Role, Visibility } from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import {
  containsSecret,
  redactJson,
  redactMessage,
  redactSecrets,
  toReceiptRedaction,
} from "../src/domain/redaction.js";

const sha = (s: string) => `sha256:${createHash("sha256").update(s).digest("hex")}`;

describe("redactSecrets", () => {
  it.each([
    ["Authorization: Bearer eyJhbGciOi.payload.sig", "bearer_token"],
    ["use sk-proj-abcdefghijklmnop1234 please", "api_key"],
    ["https://api.example.com/v1?api_key=abcd1234efgh&x=1", "credential"],
    ["password: hunter22", "credential"],
    ["token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key"],
    ["AKIAABCDEFGHIJKLMNOP", "api_key"],
    ["jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc_def", "jwt"],
    [
      "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIB\n-----END PRIVATE KEY-----",
      "private_key",
    ],
  ])("removes %j", (text, kind) => {
    const result = redactSecrets(text, "/x");
    expect(result.redactions.map((r) => r.kind)).toContain(kind);
    expect(containsSecret(result.text)).toBe(false);
    expect(result.text).toContain("[REDACTED:");
    for (const r of result.redactions) {
      expect(r.field).toBe("/x");
      expect(r.size).toBeGreaterThan(0);
      expect(r.sha256).toMatch(/^sha256:[0-9a-f]{64}$/);
    }
  });

  it("describes what it removed by size and hash", () => {
    const { text, redactions } = redactSecrets("key sk-abcdefghijklmnop");
    expect(text).toBe("key [REDACTED:api_key]");
    expect(redactions).toEqual([
      { field: "", kind: "api_key", size: 19, sha256: sha("sk-abcdefghijklmnop") },
    ]);
  });

  it("leaves ordinary text alone", () => {
    const text = "The token budget is 2000 and the skeleton key is a metaphor.";
    expect(redactSecrets(text)).toEqual({ text, redactions: [] });
  });
});

describe("redactJson", () => {
  it("replaces secret-named fields whole and secret-shaped strings in place", () => {
    const { value, redactions } = redactJson({
      headers: { Authorization: "Basic dXNlcjpwYXNz", accept: "json" },
      env: [{ name: "X", value: "Bearer abcdef123456" }],
      config: { apiKey: { nested: true }, retries: 3 },
    });
    expect(value).toEqual({
      headers: { Authorization: "[REDACTED:secret_field]", accept: "json" },
      env: [{ name: "X", value: "[REDACTED:bearer_token]" }],
      config: { apiKey: "[REDACTED:secret_field]", retries: 3 },
    });
    expect(redactions.map((r) => r.field)).toEqual([
      "/headers/Authorization",
      "/env/0/value",
      "/config/apiKey",
    ]);
  });
});

describe("redactMessage", () => {
  const message = create(MessageSchema, {
    id: "msg_1",
    role: Role.ASSISTANT,
    parts: [
      {
        visibility: Visibility.PUBLIC,
        kind: { case: "text", value: { text: "Done. Used sk-abcdefghijklmnop." } },
      },
      { visibility: Visibility.INTERNAL, kind: { case: "text", value: { text: "operator note" } } },
      { visibility: Visibility.RECEIPT_ONLY, kind: { case: "text", value: { text: "evidence" } } },
      { kind: { case: "thinking", value: { text: "private reasoning", signature: "" } } },
    ],
    toolCalls: [
      {
        id: "c1",
        name: "http",
        arguments: fromJson(ValueSchema, { url: "https://x?token=abcd1234" }),
      },
    ],
  });

  it("shows the public only the public parts, without secrets", () => {
    const { message: shown, redactions } = redactMessage(message, {}, "/messages/0");
    expect(shown.parts).toHaveLength(1);
    expect(JSON.stringify(shown.parts[0]?.kind.value)).not.toContain("sk-abcdefghijklmnop");
    expect(redactions.map((r) => [r.field, r.kind])).toEqual([
      ["/messages/0/parts/0/text/text", "api_key"],
      ["/messages/0/parts/1", "internal_content"],
      ["/messages/0/parts/2", "receipt_only_content"],
      ["/messages/0/parts/3", "reasoning"],
      ["/messages/0/tool_calls/0/arguments/url", "credential"],
    ]);
    const args = shown.toolCalls[0]?.arguments?.kind;
    expect(JSON.stringify(args)).not.toContain("abcd1234");
  });

  it("keeps receipt-only parts for receipts when the policy allows, never reasoning", () => {
    const { message: shown } = redactMessage(message, {
      allowReceiptOnly: true,
      allowInternal: true,
    });
    expect(shown.parts.map((p) => p.visibility)).toEqual([
      Visibility.PUBLIC,
      Visibility.INTERNAL,
      Visibility.RECEIPT_ONLY,
    ]);
  });

  it("turns a descriptor into a schema-valid receipt redaction", () => {
    const [descriptor] = redactSecrets(
      "Bearer abcdefghijkl",
      "/lifecycle/failure/message",
    ).redactions;
    expect(toReceiptRedaction(descriptor!)).toEqual({
      field: "/lifecycle/failure/message",
      reason: "bearer_token redacted (19 bytes)",
      proof_hash: sha("Bearer abcdefghijkl"),
    });
  });
});
