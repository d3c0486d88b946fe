// NATS authentication and TLS from the environment (natsSecurityFromEnv):
// against a throwaway nats-server that requires TLS (a CA made here) and a
// token, the event log connects with the CA and the token and works; without
// them it is refused. Bad settings are config errors naming the variable.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { EventSchema } from "@trellis/contracts/core";
import { ThrowawayNats } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectNats, createEventLog, natsSecurityFromEnv } from "../src/index.js";

const TOKEN = "nats-test-token-0123456789";

function hasOpenssl(): boolean {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** A CA and a server certificate for 127.0.0.1, in `dir`. */
function makeCertificates(dir: string): { ca: string; cert: string; key: string } {
  const at = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });
  openssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=trellis-test-ca",
    "-keyout",
    at("ca.key"),
    "-out",
    at("ca.pem"),
  );
  openssl(
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=127.0.0.1",
    "-keyout",
    at("server.key"),
    "-out",
    at("server.csr"),
  );
  writeFileSync(at("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  openssl(
    "x509",
    "-req",
    "-days",
    "1",
    "-in",
    at("server.csr"),
    "-CA",
    at("ca.pem"),
    "-CAkey",
    at("ca.key"),
    "-CAcreateserial",
    "-extfile",
    at("ext.cnf"),
    "-out",
    at("server.pem"),
  );
  return { ca: at("ca.pem"), cert: at("server.pem"), key: at("server.key") };
}

describe.skipIf(!hasOpenssl())("NATS authentication and TLS from the environment", () => {
  let dir: string;
  let certs: { ca: string; cert: string; key: string };
  let server: ThrowawayNats;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "trellis-nats-tls-"));
    certs = makeCertificates(dir);
    server = await ThrowawayNats.start({
      args: ["--tls", "--tlscert", certs.cert, "--tlskey", certs.key, "--auth", TOKEN],
      connect: { token: TOKEN, tls: { caFile: certs.ca } },
    });
  }, 60_000);

  afterAll(async () => {
    await server?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("connects with the server's CA and the token, and the event log works", async () => {
    const security = natsSecurityFromEnv({ NATS_TOKEN: TOKEN, NATS_TLS_CA_FILE: certs.ca });
    expect(security).toEqual({ token: TOKEN, tls: true, tlsCaFile: certs.ca });
    const log = await createEventLog({
      kind: "jetstream",
      servers: server.url,
      security,
      prefix: "sectest",
      storage: "memory",
    });
    try {
      const event = create(EventSchema, {
        id: "evt_secure_1",
        workspaceId: "w",
        sessionId: "s",
        kind: "test.secure",
        resource: { object: "task", id: "t1" },
      });
      await log.append([event]);
      const read = await log.read({ filter: { workspaceId: "w" } });
      expect(read.map((e) => e.event.id)).toEqual(["evt_secure_1"]);
    } finally {
      await log.close();
    }
  });

  it("is refused without the token, or without trusting the server's CA", async () => {
    const attempt = (env: Record<string, string>) =>
      connectNats({
        servers: server.url,
        maxReconnectAttempts: 0,
        timeoutMs: 2000,
        security: natsSecurityFromEnv(env),
      }).then(
        async (nc) => {
          await nc.close();
          return "connected";
        },
        (error: unknown) => String(error),
      );
    expect(await attempt({ NATS_TLS_CA_FILE: certs.ca })).toMatch(/auth|Authorization/i);
    expect(await attempt({ NATS_TOKEN: "wrong-token", NATS_TLS_CA_FILE: certs.ca })).toMatch(
      /auth|Authorization/i,
    );
    expect(await attempt({ NATS_TOKEN: TOKEN })).not.toBe("connected");
  });

  it("says which setting is wrong", () => {
    const refused = (env: Record<string, string>) => {
      try {
        natsSecurityFromEnv(env);
        return undefined;
      } catch (error) {
        return (error as { param?: string; message: string }).param;
      }
    };
    expect(refused({ NATS_USER: "u" })).toBe("NATS_PASSWORD");
    expect(refused({ NATS_TOKEN: "t", NATS_USER: "u", NATS_PASSWORD: "p" })).toBe("NATS_TOKEN");
    expect(refused({ NATS_TLS_CA_FILE: join(dir, "missing.pem") })).toBe("NATS_TLS_CA_FILE");
    expect(refused({ NATS_TLS_CERT_FILE: certs.cert })).toBe("NATS_TLS_KEY_FILE");
    expect(refused({ NATS_TLS: "maybe" })).toBe("NATS_TLS");
    expect(natsSecurityFromEnv({})).toEqual({});
    expect(natsSecurityFromEnv({ NATS_USER: "u", NATS_PASSWORD: "p" })).toEqual({
      user: "u",
      password: "p",
    });
  });
});
