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
 *
 * The receipts library (keys, signatures, the schema) is loaded only for an
 * offline check: usage errors, missing files and the online checks answer
 * without it.
 */

import type { KeyObject } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Verification } from "@trellis/receipts";
import { parseCommand, printUsage, UsageError } from "./args.js";
import { receiptsUsage } from "./usage.js";

// The Harn protocol version the REST surface wants on every call (the
// gateway's `currentProtocolVersion`; not imported, to keep this command light).
const protocolVersion = "agents-protocol-2026-04-25";

/** A JSON object (not an array, not null): @trellis/runtime's `isJsonObject`, not imported for the same reason. */
function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Reads a public key (PEM or JWK text): the receipts library's `parsePublicKey`. */
type ParsePublicKey = (text: string) => KeyObject;

const receiptsOptions = {
  "public-key": { type: "string" },
  url: { type: "string" },
  schema: { type: "string" },
  "api-key": { type: "string" },
  json: { type: "boolean" },
} as const;

/** `trellis receipts <subcommand> …`: parse the arguments, then {@link runReceiptsVerify}. */
export async function runReceipts(
  source: NodeJS.ProcessEnv,
  args: readonly string[],
): Promise<number> {
  const spec = {
    name: "receipts",
    usage: receiptsUsage,
    options: receiptsOptions,
    maxPositionals: 2,
  };
  const parsed = parseCommand(spec, args);
  if (parsed.help) return printUsage(receiptsUsage);
  const [subcommand, target] = parsed.positionals;
  if (subcommand !== "verify") {
    throw new UsageError(
      subcommand === undefined
        ? "give a subcommand (verify)"
        : `unknown subcommand ${JSON.stringify(subcommand)} (verify)`,
      "receipts",
      receiptsUsage,
    );
  }
  const { values } = parsed;
  return runReceiptsVerify(source, target, {
    ...(values["public-key"] ? { publicKey: values["public-key"] } : {}),
    ...(values.url ? { url: values.url } : {}),
    ...(values.schema ? { schema: values.schema } : {}),
    ...(values["api-key"] ? { apiKey: values["api-key"] } : {}),
    ...(values.json ? { json: true } : {}),
  });
}

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

/** One public key found in a key file, with the key id it was given, if any. */
interface FoundKey {
  keyId: string | undefined;
  key: KeyObject;
}

function keysIn(value: unknown, parsePublicKey: ParsePublicKey): FoundKey[] {
  const all = (values: unknown[]) => values.flatMap((v) => keysIn(v, parsePublicKey));
  if (Array.isArray(value)) return all(value);
  if (!isJsonObject(value)) throw new Error("expected a JWK, a JWKS or a list of keys");
  // A JWKS.
  if (Array.isArray(value.keys)) return all(value.keys);
  // `GET /v1/receipts/public-keys` as it comes: {object: "list", data: [...]}.
  if (Array.isArray(value.data)) return all(value.data);
  // One entry of that list: {key_id, public_key_pem, jwk, ...}.
  if (isJsonObject(value.jwk) || typeof value.public_key_pem === "string") {
    const keyId =
      typeof value.key_id === "string"
        ? value.key_id
        : isJsonObject(value.jwk) && typeof value.jwk.kid === "string"
          ? value.jwk.kid
          : undefined;
    const text = isJsonObject(value.jwk)
      ? JSON.stringify(value.jwk)
      : (value.public_key_pem as string);
    return [{ keyId, key: parsePublicKey(text) }];
  }
  // A bare JWK.
  return [
    {
      keyId: typeof value.kid === "string" ? value.kid : undefined,
      key: parsePublicKey(JSON.stringify(value)),
    },
  ];
}

/**
 * Public keys from a file: a PEM, a JWK, a JWKS, or the service's own export
 * (`GET /v1/receipts/public-keys`, saved as it comes). One key is trusted
 * whatever key id a receipt names (the caller vouches for it); several are
 * looked up by key id.
 */
export function publicKeysFrom(
  text: string,
  parsePublicKey: ParsePublicKey,
): (keyId: string) => KeyObject | undefined {
  const trimmed = text.trim();
  if (!trimmed.startsWith("{") && !trimmed.startsWith("[")) {
    const key = parsePublicKey(trimmed);
    return () => key;
  }
  const found = keysIn(JSON.parse(trimmed), parsePublicKey);
  if (found.length === 0) throw new Error("the file holds no public key");
  if (found.length === 1) {
    const only = (found[0] as FoundKey).key;
    return () => only;
  }
  const byId = new Map<string, KeyObject>();
  for (const { keyId, key } of found) if (keyId !== undefined) byId.set(keyId, key);
  return (keyId) => byId.get(keyId);
}

/** A connection or usage problem: exit code 2 (1 means "not valid"). */
class VerifyUsageError extends Error {}

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
      // The REST surface refuses calls without the protocol version.
      "harn-agents-protocol-version": protocolVersion,
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
    },
    ...(body === undefined ? {} : { body }),
  }).catch((error: unknown) => {
    const cause =
      error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
    throw new VerifyUsageError(
      `cannot reach Trellis at ${new URL(url).origin} (${cause}); is it running? (--url)`,
    );
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new VerifyUsageError(`${url} answered ${response.status} with non-JSON content`);
  }
  if (!response.ok || !isJsonObject(parsed)) {
    const error = isJsonObject(parsed) && isJsonObject(parsed.error) ? parsed.error : {};
    const hint =
      response.status === 401
        ? " (give --api-key KEY or TRELLIS_API_KEY)"
        : response.status === 404
          ? " (no such receipt)"
          : "";
    throw new VerifyUsageError(
      `${url} answered ${response.status}: ${String(error.code ?? "")} ${String(error.message ?? text)}`.trim() +
        hint,
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

/**
 * `trellis receipts verify`: exit code 0 valid, 1 not valid, 2 a usage or
 * connection problem (said on stderr).
 */
export async function runReceiptsVerify(
  source: NodeJS.ProcessEnv,
  target: string | undefined,
  options: ReceiptsVerifyOptions,
): Promise<number> {
  try {
    return await verify(source, target, options);
  } catch (error) {
    if (error instanceof VerifyUsageError) {
      process.stderr.write(`trellis receipts verify: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}

function readKeys(
  file: string,
  parsePublicKey: ParsePublicKey,
): (keyId: string) => KeyObject | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new VerifyUsageError(
      `cannot read the public key file ${file}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  try {
    return publicKeysFrom(text, parsePublicKey);
  } catch (error) {
    throw new VerifyUsageError(
      `${file} holds no usable public key (a PEM, JWK, JWKS or the GET /v1/receipts/public-keys answer): ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

async function verify(
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
      const { createSchemaValidator, parsePublicKey, verifyReceipt } = await import(
        "@trellis/receipts"
      );
      const publicKey = readKeys(options.publicKey, parsePublicKey);
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
