/**
 * The deployment's secret fingerprint key (`fingerprint-key.ts`): derived
 * from the mesh secret in distributed mode, kept in the embedded database in
 * embedded mode (the same across a restart with a data directory), explicit
 * with TRELLIS_FINGERPRINT_KEY; a malformed key is refused naming the
 * variable, never repeating it.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isSecretFingerprint, isTrellisError, SecretFingerprints } from "@trellis/runtime";
import { afterAll, describe, expect, it } from "vitest";
import {
  distributedFingerprints,
  FINGERPRINT_KEY_LABEL,
  fingerprintKeyFromEnv,
  MeshCredentials,
  runService,
  type ServiceContext,
  type ServiceDefinition,
  startEmbedded,
} from "../src/index.js";

const PIN = "482913";

/** A service that only hands out its context. */
function probe(onContext: (ctx: ServiceContext) => void): ServiceDefinition {
  return {
    name: "probe",
    provides: [],
    defaultPort: 0,
    create(ctx) {
      onContext(ctx);
      return {};
    },
  };
}

/** The fingerprint of {@link PIN} in an embedded Trellis started with `options`. */
async function embeddedFingerprint(
  options: { dataDir?: string; env?: Record<string, string> } = {},
): Promise<string> {
  let ctx: ServiceContext | undefined;
  const trellis = await startEmbedded({
    services: [probe((c) => (ctx = c))],
    port: 0,
    env: options.env ?? {},
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
  });
  try {
    if (!ctx) throw new Error("the probe service was not built");
    return ctx.fingerprints.of(PIN);
  } finally {
    await trellis.close({ graceMs: 100 });
  }
}

function expectConfigInvalid(run: () => unknown, secretText: string): void {
  let thrown: unknown;
  try {
    run();
  } catch (error) {
    thrown = error;
  }
  expect(isTrellisError(thrown), String(thrown)).toBe(true);
  if (!isTrellisError(thrown)) return;
  expect(thrown.reason).toBe("config_invalid");
  expect(thrown.param).toBe("TRELLIS_FINGERPRINT_KEY");
  expect(thrown.message).toContain("TRELLIS_FINGERPRINT_KEY");
  if (secretText.length > 3) expect(thrown.message).not.toContain(secretText);
}

describe("secret fingerprints", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it("are hmac-sha256 of the value's RFC 8785 form, never its plain hash", () => {
    const key = randomBytes(32);
    const fingerprint = new SecretFingerprints(key).of(PIN);
    expect(isSecretFingerprint(fingerprint)).toBe(true);
    const plain = createHash("sha256").update(JSON.stringify(PIN)).digest("hex");
    expect(fingerprint).not.toContain(plain);
    expect(fingerprint).toBe(new SecretFingerprints(Buffer.from(key)).of(PIN));
    expect(() => new SecretFingerprints(randomBytes(16))).toThrow(/at least 32 bytes/);
  });

  it("distributed: derived from the mesh secret, different per deployment, explicit key first", () => {
    const secretA = randomBytes(32).toString("base64url");
    const secretB = randomBytes(32).toString("base64url");
    const a1 = distributedFingerprints({}, new MeshCredentials(secretA)).of(PIN);
    const a2 = distributedFingerprints({}, new MeshCredentials(secretA)).of(PIN);
    const b = distributedFingerprints({}, new MeshCredentials(secretB)).of(PIN);
    expect(a1).toBe(a2);
    expect(a1).not.toBe(b);
    // HKDF of the secret with the fixed label, not the secret itself.
    expect(a1).toBe(
      new SecretFingerprints(new MeshCredentials(secretA).deriveKey(FINGERPRINT_KEY_LABEL)).of(PIN),
    );
    expect(a1).not.toBe(new SecretFingerprints(Buffer.from(secretA)).of(PIN));
    const explicit = randomBytes(32);
    const env = { TRELLIS_FINGERPRINT_KEY: explicit.toString("base64") };
    expect(distributedFingerprints(env, new MeshCredentials(secretA)).of(PIN)).toBe(
      new SecretFingerprints(explicit).of(PIN),
    );
    expect(distributedFingerprints(env, new MeshCredentials(secretB)).of(PIN)).toBe(
      distributedFingerprints(env, new MeshCredentials(secretA)).of(PIN),
    );
  });

  it("refuses a malformed TRELLIS_FINGERPRINT_KEY with a typed error naming the variable", () => {
    const short = randomBytes(16).toString("base64");
    for (const garbage of [short, "not base64 at all!", "%%%%", "YWJj", `${short}=`]) {
      expectConfigInvalid(
        () => fingerprintKeyFromEnv({ TRELLIS_FINGERPRINT_KEY: garbage }),
        garbage,
      );
    }
    expect(fingerprintKeyFromEnv({})).toBeUndefined();
    expect(fingerprintKeyFromEnv({ TRELLIS_FINGERPRINT_KEY: "  " })).toBeUndefined();
    expect(
      fingerprintKeyFromEnv({ TRELLIS_FINGERPRINT_KEY: randomBytes(48).toString("base64") }),
    ).toHaveLength(48);
  });

  it("a service refuses to start with a malformed key, before connecting to anything", async () => {
    const error = await runService(
      probe(() => undefined),
      {
        env: {
          DATABASE_URL: "postgres://nobody@127.0.0.1:1/none",
          TRELLIS_MESH_SECRET: randomBytes(32).toString("base64url"),
          TRELLIS_FINGERPRINT_KEY: "short",
          TRELLIS_STARTUP_TIMEOUT: "100",
        },
        handleSignals: false,
      },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isTrellisError(error) && error.reason).toBe("config_invalid");
    expect(isTrellisError(error) && error.param).toBe("TRELLIS_FINGERPRINT_KEY");
  });

  it("embedded: kept in the database, the same across a restart, different per deployment", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trellis-fingerprint-"));
    const otherDir = await mkdtemp(join(tmpdir(), "trellis-fingerprint-"));
    dirs.push(dataDir, otherDir);
    const first = await embeddedFingerprint({ dataDir });
    expect(isSecretFingerprint(first)).toBe(true);
    expect(await embeddedFingerprint({ dataDir })).toBe(first);
    expect(await embeddedFingerprint({ dataDir: otherDir })).not.toBe(first);
    // In memory: a key of the database's own.
    expect(await embeddedFingerprint()).not.toBe(first);
    // An explicit key wins in embedded mode too.
    const explicit = randomBytes(32);
    expect(
      await embeddedFingerprint({
        dataDir,
        env: { TRELLIS_FINGERPRINT_KEY: explicit.toString("base64") },
      }),
    ).toBe(new SecretFingerprints(explicit).of(PIN));
  }, 60_000);
});
