/**
 * The OAuth-credential vault provider, one suite for both stores (PGlite
 * embedded, PostgreSQL): a refresh grant kept sealed like any secret, access
 * tokens fetched from a local token endpoint when needed and cached until
 * expiry, a rotated refresh token stored, tools given the access token only,
 * nothing of the grant in any answer, and an unknown provider refused as
 * not implemented, naming the supported ones.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { VaultAccessService, VaultService } from "@trellis/contracts/adapters";
import { adaptersMigrations, OAuthTokens, VaultStore } from "@trellis/execution";
import { errorDetailOf, SecretBox } from "@trellis/runtime";
import { type Database, migrate } from "@trellis/storage";
import { callFailure } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withErrorDetails } from "../src/handlers/errors.js";
import { createVaultAccessHandlers, createVaultHandlers } from "../src/index.js";

/** Opens a fresh database of the backend under test. */
export type OpenDatabase = () => Promise<{ db: Database; close(): Promise<void> }>;

/** A token endpoint that counts refreshes and rotates refresh tokens. */
async function startTokenEndpoint() {
  const seen: URLSearchParams[] = [];
  let refuse = false;
  let lifetime = 3600;
  let issued = 0;
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on("end", () => {
      const form = new URLSearchParams(body);
      seen.push(form);
      res.setHeader("content-type", "application/json");
      if (refuse || form.get("client_secret") !== "shh-client-secret") {
        res.statusCode = 400;
        res.end(JSON.stringify({ error: "invalid_grant", error_description: body }));
        return;
      }
      issued += 1;
      res.end(
        JSON.stringify({
          access_token: `access-${issued}`,
          token_type: "Bearer",
          expires_in: lifetime,
          refresh_token: `refresh-${issued}`,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/token`,
    seen,
    setRefuse: (value: boolean) => {
      refuse = value;
    },
    setLifetime: (seconds: number) => {
      lifetime = seconds;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Registers the suite for one backend. */
export function describeOAuthVaults(name: string, open: OpenDatabase): void {
  describe(`oauth vault provider (${name})`, () => {
    let database: Awaited<ReturnType<OpenDatabase>>;
    let endpoint: Awaited<ReturnType<typeof startTokenEndpoint>>;
    let store: VaultStore;
    let now = Date.now();
    const schema = `adapters_oauth_${randomBytes(4).toString("hex")}`;

    beforeAll(async () => {
      database = await open();
      await migrate(database.db, { schema, migrations: adaptersMigrations });
      endpoint = await startTokenEndpoint();
      store = new VaultStore(
        database.db,
        schema,
        new SecretBox(randomBytes(32), { keyName: "TEST_VAULT_KEY" }),
        new OAuthTokens({ now: () => now }),
      );
    });

    afterAll(async () => {
      await endpoint?.close();
      await database?.close();
    });

    function clients() {
      const transport = createRouterTransport(({ service }) => {
        service(VaultService, withErrorDetails(VaultService, createVaultHandlers(store)));
        service(
          VaultAccessService,
          withErrorDetails(VaultAccessService, createVaultAccessHandlers(store)),
        );
      });
      const headers = {
        "x-trellis-actor": "tester",
        "x-trellis-workspace": "w1",
        "x-trellis-scopes": "vaults:read,vaults:write",
      };
      return {
        vaults: createClient(VaultService, transport),
        access: createClient(VaultAccessService, transport),
        options: { headers },
      };
    }

    async function oauthVault(): Promise<string> {
      const { vaults, options } = clients();
      const { vault } = await vaults.createVault(
        { provider: "oauth", allowedAgentIds: ["agent_tool"] },
        options,
      );
      expect(vault?.capabilities).toEqual(["oauth_refresh", "read", "write"]);
      const id = vault?.id as string;
      for (const [name, value] of [
        ["token_endpoint", endpoint.url],
        ["client_id", "client-1"],
        ["client_secret", "shh-client-secret"],
        ["refresh_token", "refresh-0"],
      ] as const) {
        await vaults.putSecret({ vaultId: id, name, value }, options);
      }
      return id;
    }

    it("refuses an unknown provider as not implemented, naming the supported ones", async () => {
      const { vaults, options } = clients();
      const refused = await callFailure(
        vaults.createVault({ provider: "conformance-oauth" }, options),
      );
      expect(refused.code).toBe(Code.Unimplemented);
      expect(errorDetailOf(refused)?.reason).toBe("not_implemented");
      expect(refused.rawMessage).toContain("trellis, oauth");
      expect((await vaults.listVaults({}, options)).vaults).toHaveLength(0);
    });

    it("keeps the grant sealed and hands tools a cached, refreshed access token only", async () => {
      const { vaults, options } = clients();
      const id = await oauthVault();
      const wrong = await callFailure(
        vaults.putSecret({ vaultId: id, name: "api_key", value: "x" }, options),
      );
      expect(errorDetailOf(wrong)?.reason).toBe("invalid_request");
      const badUrl = await callFailure(
        vaults.putSecret({ vaultId: id, name: "token_endpoint", value: "file:///etc" }, options),
      );
      expect(errorDetailOf(badUrl)?.reason).toBe("invalid_request");

      const before = endpoint.seen.length;
      const first = (await store.accessFor("w1", "agent_tool")).get(id);
      expect(first).toEqual({ allowed: true, secrets: new Map([["access_token", "access-1"]]) });
      const form = endpoint.seen.at(-1);
      expect(form?.get("grant_type")).toBe("refresh_token");
      expect(form?.get("refresh_token")).toBe("refresh-0");
      expect(form?.get("client_id")).toBe("client-1");
      // Cached until it expires: no second refresh.
      expect((await store.accessFor("w1", "agent_tool")).get(id)).toEqual(first);
      expect(endpoint.seen.length).toBe(before + 1);
      // Another agent is refused by the policy, without a refresh.
      expect((await store.accessFor("w1", "agent_other")).get(id)).toMatchObject({
        allowed: false,
      });

      // Past expiry (less the skew) it refreshes, with the rotated refresh token.
      now += 3600_000;
      const second = (await store.accessFor("w1", "agent_tool")).get(id);
      expect(second).toEqual({ allowed: true, secrets: new Map([["access_token", "access-2"]]) });
      expect(endpoint.seen.at(-1)?.get("refresh_token")).toBe("refresh-1");

      // Concurrent asks past expiry share one refresh.
      now += 3600_000;
      const count = endpoint.seen.length;
      const both = await Promise.all([
        store.accessFor("w1", "agent_tool"),
        store.accessFor("w1", "agent_tool"),
      ]);
      expect(endpoint.seen.length).toBe(count + 1);
      expect(both[0].get(id)).toEqual(both[1].get(id));

      // Mesh services (connectors) get a token through the internal RPC; callers never do.
      const { access } = clients();
      const token = await access.getAccessToken({ workspaceId: "w1", vaultId: id });
      expect(token.accessToken).toBe("access-3");
      expect(
        (await callFailure(access.getAccessToken({ workspaceId: "w1", vaultId: id }, options)))
          .code,
      ).toBe(Code.PermissionDenied);
      expect(
        errorDetailOf(await callFailure(access.getAccessToken({ workspaceId: "w2", vaultId: id })))
          ?.reason,
      ).toBe("resource_not_found");

      // No answer of the API carries a secret of the grant.
      const answers = JSON.stringify(
        [
          await vaults.getVault({ vaultId: id }, options),
          await vaults.listSecrets({ vaultId: id }, options),
          await vaults.listVaults({}, options),
        ],
        (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value),
      );
      for (const secret of ["shh-client-secret", "refresh-2", "refresh-3", "access-3"]) {
        expect(answers).not.toContain(secret);
      }
    });

    it("a refused refresh denies the vault, naming it and no secret", async () => {
      const id = await oauthVault();
      endpoint.setRefuse(true);
      try {
        const denied = (await store.accessFor("w1", "agent_tool")).get(id);
        expect(denied).toMatchObject({ allowed: false });
        const reason = denied && !denied.allowed ? denied.reason : "";
        expect(reason).toContain(id);
        expect(reason).toContain("invalid_grant");
        expect(reason).not.toContain("shh-client-secret");
        const { access } = clients();
        const error = await callFailure(access.getAccessToken({ workspaceId: "w1", vaultId: id }));
        expect(errorDetailOf(error)?.reason).toBe("upstream_unavailable");
        expect(error.rawMessage).not.toContain("refresh-0");
      } finally {
        endpoint.setRefuse(false);
      }
    });
  });
}
