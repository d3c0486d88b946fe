/**
 * `trellis receipts verify <id|file>`: verify a receipt.
 *
 *   offline  <file> --public-key KEY   an exported receipt (the bare document,
 *            a Harn Receipt resource, or a GetReceipt response) checked
 *            against a public key (PEM, JWK or JWKS): schema marker, hash,
 *            signature; nothing leaves the machine. `--schema FILE` also
 *            validates against the receipt JSON Schema.
 *   online   <id> [--url URL]          the service re-checks the stored receipt:
 *            hash, stored bytes, chain links, signature.
 *            <file> --url URL (no key)   the service checks the document.
 *
 * Exit code 0 when valid, 1 when not, 2 on a usage or connection error.
 */

import type { KeyObject } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import {
  createSchemaValidator,
  isJsonObject,
  parsePublicKey,
  type Verification,
  verifyReceipt,
} from "@trellis/receipts";

/** Options of {@link runReceiptsVerify}. */
export interface ReceiptsVerifyOptions {
  publicKey?: string;
  url?: string;
  schema?: string;
  apiKey?: string;
  json?: boolean;
}

interface Printable {
  valid: boolean;
  mode: "offline" | "online";
  receipt_id: string | null;
  key_id: string | null;
  checks: string[];
  problems: { code: string; message: string; field?: string | null }[];
}

/** The receipt document inside whatever was exported. */
export function receiptDocumentOf(value: unknown): unknown {
  if (!isJsonObject(value)) return value;
  if (isJsonObject(value.wire) && isJsonObject(value.wire.payload)) return value.wire.payload;
  const receipt = isJsonObject(value.receipt) ? value.receipt : value;
  const documentJson = receipt.documentJson ?? receipt.document_json;
  if (typeof documentJson === "string") return JSON.parse(documentJson);
  return receipt;
}

/** Public keys from a file: one PEM or JWK (any key id), or a JWKS (by `kid`). */
export function publicKeysFrom(text: string): (keyId: string) => KeyObject | undefined {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    const parsed: unknown = JSON.parse(trimmed);
    if (isJsonObject(parsed) && Array.isArray(parsed.keys) && parsed.keys.length > 1) {
      const byId = new Map<string, KeyObject>();
      for (const jwk of parsed.keys) {
        if (isJsonObject(jwk) && typeof jwk.kid === "string") {
          byId.set(jwk.kid, parsePublicKey(JSON.stringify(jwk)));
        }
      }
      return (keyId) => byId.get(keyId);
    }
  }
  // One key: the caller vouches for it, whatever key id the receipt names.
  const key = parsePublicKey(trimmed);
  return () => key;
}

function baseUrl(source: NodeJS.ProcessEnv, url: string | undefined): string {
  return (url ?? source.TRELLIS_URL ?? `http://127.0.0.1:${source.TRELLIS_PORT ?? "8080"}`).replace(
    /\/+$/,
    "",
  );
}

async function postJson(
  url: string,
  body: string | undefined,
  apiKey: string | undefined,
): Promise<Record<string, unknown>> {
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
    },
    ...(body === undefined ? {} : { body }),
  }).catch((error: unknown) => {
    const cause =
      error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
    throw new Error(
      `cannot reach Trellis at ${new URL(url).origin} (${cause}); is it running? (--url)`,
    );
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${url} answered ${response.status} with non-JSON content`);
  }
  if (!response.ok || !isJsonObject(parsed)) {
    const error = isJsonObject(parsed) && isJsonObject(parsed.error) ? parsed.error : {};
    throw new Error(
      `${url} answered ${response.status}: ${String(error.code ?? "")} ${String(error.message ?? text)}`.trim(),
    );
  }
  return parsed;
}

function fromVerification(result: Verification): Printable {
  return {
    valid: result.valid,
    mode: "offline",
    receipt_id: result.receiptId ?? null,
    key_id: result.keyId ?? null,
    checks: result.checks,
    problems: result.problems,
  };
}

function fromResponse(body: Record<string, unknown>): Printable {
  const details = isJsonObject(body.details) ? body.details : {};
  const problems = Array.isArray(body.problems) ? body.problems : [];
  return {
    valid: body.valid === true,
    mode: "online",
    receipt_id: typeof details.receipt_id === "string" ? details.receipt_id : null,
    key_id: typeof details.key_id === "string" ? details.key_id : null,
    checks: Array.isArray(details.checks) ? details.checks.map(String) : [],
    problems: problems.filter(isJsonObject).map((p) => ({
      code: String(p.code),
      message: String(p.message),
      field: typeof p.field === "string" ? p.field : null,
    })),
  };
}

function print(result: Printable, json: boolean | undefined): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  const lines = [
    `${result.valid ? "VALID" : "INVALID"}  receipt ${result.receipt_id ?? "(no id)"} (${result.mode})`,
    `  key:    ${result.key_id ?? "-"}`,
    `  checks: ${result.checks.join(", ") || "-"}`,
  ];
  if (result.mode === "offline") lines.push("  chain:  not checked offline (verify by id online)");
  for (const p of result.problems) {
    lines.push(`  ${p.code}${p.field ? ` at ${p.field}` : ""}: ${p.message}`);
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

/** `trellis receipts verify`. */
export async function runReceiptsVerify(
  source: NodeJS.ProcessEnv,
  target: string | undefined,
  options: ReceiptsVerifyOptions,
): Promise<number> {
  if (!target) {
    process.stderr.write(
      "trellis receipts verify: give a receipt id or an exported receipt file\n",
    );
    return 2;
  }
  const apiKey = options.apiKey ?? source.TRELLIS_API_KEY;
  if (existsSync(target)) {
    let document: unknown;
    try {
      document = receiptDocumentOf(JSON.parse(readFileSync(target, "utf8")));
    } catch (error) {
      process.stderr.write(
        `trellis receipts verify: ${target} is not a receipt JSON file: ${error instanceof Error ? error.message : String(error)}\n`,
      );
      return 2;
    }
    if (options.publicKey) {
      const publicKey = publicKeysFrom(readFileSync(options.publicKey, "utf8"));
      const validateSchema = options.schema
        ? createSchemaValidator(JSON.parse(readFileSync(options.schema, "utf8")) as object)
        : undefined;
      const result = verifyReceipt(document, {
        publicKey,
        ...(validateSchema ? { validateSchema } : {}),
      });
      print(fromVerification(result), options.json);
      return result.valid ? 0 : 1;
    }
    if (!options.url && !source.TRELLIS_URL) {
      process.stderr.write(
        "trellis receipts verify: give --public-key FILE to verify the file offline, or --url URL to have Trellis verify it\n",
      );
      return 2;
    }
    const body = await postJson(
      `${baseUrl(source, options.url)}/v1/receipts/verify`,
      JSON.stringify(document),
      apiKey,
    );
    const result = fromResponse(body);
    print(result, options.json);
    return result.valid ? 0 : 1;
  }
  // Not a file: a receipt id for the online check. Something that can only be
  // a path (or an offline check, which needs a file) is a missing file.
  if (options.publicKey || /[/\\]|\.json$/i.test(target)) {
    process.stderr.write(`trellis receipts verify: no such receipt file: ${target}\n`);
    return 2;
  }
  const body = await postJson(
    `${baseUrl(source, options.url)}/v1/receipts/${encodeURIComponent(target)}/verify`,
    undefined,
    apiKey,
  );
  const result = fromResponse(body);
  print(result, options.json);
  return result.valid ? 0 : 1;
}
