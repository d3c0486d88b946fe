/**
 * Redaction (Harn Agents Protocol v1, "Privacy and redaction"): public,
 * internal and receipt-only content are kept apart; hidden model reasoning,
 * secrets, bearer tokens, private keys and raw credentials never appear in
 * public messages, events or receipts; redacted content leaves a descriptor
 * (what kind, how large, its hash) so audit continuity holds.
 *
 * Shared helpers, exported from `@trellis/receipts` for every service that
 * shows content to someone:
 *
 * - {@link redactSecrets} / {@link redactJson}: strip secrets from text and
 *   JSON values (patterns below and secret-named keys), always, whatever the
 *   audience;
 * - {@link redactMessage}: drop the parts an audience may not see
 *   (`internal`, `receipt_only`, and reasoning, which is never shown), then
 *   strip secrets from what is left;
 * - {@link toReceiptRedaction}: a descriptor as a receipt `redactions[]` entry.
 *
 * Pure: no I/O.
 */
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Message, type Part, PartSchema, Visibility } from "@trellis/contracts/core";
import { canonicalJson, sha256Of } from "./canonical.js";
import type { Redaction, Sha256 } from "./receipt.js";

/** Why something was removed. */
export type RedactionKind =
  | "bearer_token"
  | "api_key"
  | "private_key"
  | "jwt"
  | "credential"
  | "secret_field"
  | "internal_content"
  | "receipt_only_content"
  | "reasoning";

/**
 * What was removed, without the content: where (JSON pointer), what kind,
 * how many UTF-8 bytes and their SHA-256.
 */
export interface RedactionDescriptor {
  field: string;
  kind: RedactionKind;
  size: number;
  sha256: Sha256;
}

/** Who will see the content. */
export interface RedactionPolicy {
  /** Keep `internal` parts (operators' views only). Default false. */
  allowInternal?: boolean;
  /** Keep `receipt_only` parts (evidence inside receipts). Default false. */
  allowReceiptOnly?: boolean;
}

interface SecretPattern {
  kind: RedactionKind;
  pattern: RegExp;
  /** Index of the capture group holding the secret (0 = the whole match). */
  group: number;
}

/**
 * Secret shapes, most specific first. Each match is replaced by
 * `[REDACTED:<kind>]` (for key=value forms only the value).
 */
const SECRET_PATTERNS: readonly SecretPattern[] = [
  {
    kind: "private_key",
    pattern:
      /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g,
    group: 0,
  },
  { kind: "bearer_token", pattern: /\bBearer\s+[A-Za-z0-9\-._~+/]+=*/gi, group: 0 },
  { kind: "bearer_token", pattern: /\bBasic\s+[A-Za-z0-9+/]{8,}={0,2}/g, group: 0 },
  {
    kind: "jwt",
    pattern: /\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+/g,
    group: 0,
  },
  // OpenAI / Anthropic style keys (sk-…, sk-ant-…, sk-proj-…).
  { kind: "api_key", pattern: /\bsk-[A-Za-z0-9_-]{8,}/g, group: 0 },
  // GitHub, Slack, AWS access key ids, Google API keys.
  { kind: "api_key", pattern: /\bgh[pousr]_[A-Za-z0-9]{20,}/g, group: 0 },
  { kind: "api_key", pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/g, group: 0 },
  { kind: "api_key", pattern: /\bAKIA[0-9A-Z]{16}\b/g, group: 0 },
  { kind: "api_key", pattern: /\bAIza[0-9A-Za-z_-]{35}\b/g, group: 0 },
  // key=value / key: value forms (query strings, headers, env dumps).
  {
    kind: "credential",
    pattern:
      /\b(?:api[_-]?key|apikey|access[_-]?token|refresh[_-]?token|auth[_-]?token|client[_-]?secret|password|passwd|secret|token)\s*[=:]\s*["']?([^\s"'&,;]{4,})/gi,
    group: 1,
  },
];

/** Keys whose values are secrets whatever they look like. */
const SECRET_KEY =
  /^(?:authorization|proxy[-_]?authorization|cookie|set[-_]?cookie|x[-_]?api[-_]?key|api[-_]?key|apikey|access[-_]?token|refresh[-_]?token|id[-_]?token|auth[-_]?token|client[-_]?secret|password|passwd|secret|private[-_]?key|secret[-_]?key|token|credentials?)$/i;

function describe(field: string, kind: RedactionKind, content: string): RedactionDescriptor {
  return {
    field,
    kind,
    size: Buffer.byteLength(content, "utf8"),
    sha256: sha256Of(content),
  };
}

/** The text with every secret replaced, and a descriptor per secret. */
export function redactSecrets(
  text: string,
  field = "",
): { text: string; redactions: RedactionDescriptor[] } {
  const redactions: RedactionDescriptor[] = [];
  let out = text;
  for (const { kind, pattern, group } of SECRET_PATTERNS) {
    pattern.lastIndex = 0;
    out = out.replace(pattern, (match: string, ...groups: unknown[]) => {
      const secret = group === 0 ? match : String(groups[group - 1] ?? "");
      if (secret === "" || secret.startsWith("[REDACTED:")) return match;
      redactions.push(describe(field, kind, secret));
      return group === 0 ? `[REDACTED:${kind}]` : match.replace(secret, `[REDACTED:${kind}]`);
    });
  }
  return { text: out, redactions };
}

/** Whether `text` contains anything {@link redactSecrets} would remove. */
export function containsSecret(text: string): boolean {
  return redactSecrets(text).redactions.length > 0;
}

function pointer(base: string, key: string | number): string {
  return `${base}/${String(key).replaceAll("~", "~0").replaceAll("/", "~1")}`;
}

/**
 * A copy of a JSON value with secrets removed: values of secret-named keys
 * (`authorization`, `api_key`, `password`, `token`, …) are replaced whole,
 * secret-shaped substrings of every other string are replaced in place.
 * Descriptors carry JSON pointers relative to `base`.
 */
export function redactJson(
  value: JsonValue,
  base = "",
): { value: JsonValue; redactions: RedactionDescriptor[] } {
  const redactions: RedactionDescriptor[] = [];
  const walk = (v: JsonValue, at: string): JsonValue => {
    if (typeof v === "string") {
      const result = redactSecrets(v, at);
      redactions.push(...result.redactions);
      return result.text;
    }
    if (Array.isArray(v)) return v.map((item, i) => walk(item, pointer(at, i)));
    if (v !== null && typeof v === "object") {
      const out: { [key: string]: JsonValue } = {};
      for (const [key, item] of Object.entries(v)) {
        if (item === undefined) continue;
        const path = pointer(at, key);
        if (SECRET_KEY.test(key) && item !== null && item !== "") {
          redactions.push(
            describe(path, "secret_field", typeof item === "string" ? item : canonicalJson(item)),
          );
          out[key] = "[REDACTED:secret_field]";
        } else {
          out[key] = walk(item, path);
        }
      }
      return out;
    }
    return v;
  };
  return { value: walk(value, base), redactions };
}

/** The visibility a part really has (unspecified: public, except reasoning). */
export function effectiveVisibility(part: Part): Visibility {
  if (part.visibility !== Visibility.UNSPECIFIED) return part.visibility;
  const kind = part.kind.case;
  return kind === "thinking" || kind === "redactedThinking"
    ? Visibility.INTERNAL
    : Visibility.PUBLIC;
}

/** Why a part may not be shown under `policy`, or undefined when it may. */
function hiddenBecause(part: Part, policy: RedactionPolicy): RedactionKind | undefined {
  const kind = part.kind.case;
  // Hidden model reasoning never appears, whatever the policy.
  if (kind === "thinking" || kind === "redactedThinking") return "reasoning";
  switch (effectiveVisibility(part)) {
    case Visibility.INTERNAL:
      return policy.allowInternal ? undefined : "internal_content";
    case Visibility.RECEIPT_ONLY:
      return policy.allowReceiptOnly ? undefined : "receipt_only_content";
    default:
      return undefined;
  }
}

/**
 * A message as an audience may see it: parts it may not see are removed
 * (each leaves a descriptor), secrets are stripped from the rest (text,
 * JSON, tool inputs and outputs, tool call arguments). `base` prefixes the
 * descriptors' JSON pointers (e.g. `/messages/3`).
 */
export function redactMessage(
  message: Message,
  policy: RedactionPolicy = {},
  base = "",
): { message: Message; redactions: RedactionDescriptor[] } {
  const redactions: RedactionDescriptor[] = [];
  const parts: Part[] = [];
  message.parts.forEach((part, index) => {
    const field = pointer(`${base}/parts`, index);
    const hidden = hiddenBecause(part, policy);
    if (hidden) {
      redactions.push(describe(field, hidden, canonicalJson(toJson(PartSchema, part))));
      return;
    }
    const json = toJson(PartSchema, part);
    const cleaned = redactJson(json, field);
    redactions.push(...cleaned.redactions);
    parts.push(cleaned.redactions.length ? fromPartJson(cleaned.value, part) : part);
  });
  const toolCalls = message.toolCalls.map((call, index) => {
    if (!call.arguments) return call;
    const args = toJson(ValueSchema, call.arguments);
    const cleaned = redactJson(args, `${pointer(`${base}/tool_calls`, index)}/arguments`);
    if (cleaned.redactions.length === 0) return call;
    redactions.push(...cleaned.redactions);
    return withArguments(call, cleaned.value);
  });
  return { message: { ...message, parts, toolCalls }, redactions };
}

function fromPartJson(value: JsonValue, original: Part): Part {
  try {
    return fromJson(PartSchema, value);
  } catch {
    // Cannot happen (the JSON came from the same schema); drop the content if it does.
    return { ...original, kind: { case: undefined } };
  }
}

function withArguments(
  call: Message["toolCalls"][number],
  args: JsonValue,
): Message["toolCalls"][number] {
  return { ...call, arguments: fromJson(ValueSchema, args) };
}

/**
 * A descriptor as a receipt `redactions[]` entry: the schema keeps only
 * `field`, `reason` and `proof_hash`, so kind and size go into `reason`
 * (`"bearer_token redacted (41 bytes)"`).
 */
export function toReceiptRedaction(descriptor: RedactionDescriptor): Redaction {
  return {
    field: descriptor.field || "/",
    reason: `${descriptor.kind} redacted (${descriptor.size} bytes)`,
    proof_hash: descriptor.sha256,
  };
}
