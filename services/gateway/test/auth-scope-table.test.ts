// One authorization table: every REST route declares its rule once (its
// `scope`, from which src/http/routes/rules.ts is derived), and
// src/auth/scope-table.ts covers every RPC method the public port can serve —
// and nothing else. Adding an RPC without a rule fails here (and is refused at
// run time: no rule means closed); a route without one does not compile.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { DescService } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { jwksPath, tokenPath } from "../src/auth/oauth-endpoint.js";
import { authorize, rpcRuleOf, rpcRules } from "../src/auth/scope-table.js";
import { isScope, scopeNames } from "../src/domain/scopes.js";
import { notServedRoutes } from "../src/http/harn-surface.js";
import { restRoutes } from "../src/http/routes/index.js";
import { oauthRoutes, restRuleOf, restRules } from "../src/http/routes/rules.js";

const genDir = fileURLToPath(new URL("../../../packages/contracts/src/gen/", import.meta.url));

function generatedFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return generatedFiles(path);
    return entry.name.endsWith("_pb.ts") ? [path] : [];
  });
}

/** Every RPC service in the generated contracts (new .proto services included). */
async function allServices(): Promise<DescService[]> {
  const services = new Map<string, DescService>();
  for (const file of generatedFiles(genDir)) {
    const module = (await import(file)) as Record<string, unknown>;
    for (const value of Object.values(module)) {
      const desc = value as Partial<DescService> | null;
      if (desc && typeof desc === "object" && desc.kind === "service" && desc.typeName) {
        services.set(desc.typeName, desc as DescService);
      }
    }
  }
  return [...services.values()];
}

/** Every rule a route or RPC may carry besides a scope. */
const kinds = ["public", "admin", "authenticated", "internal"];

describe("the authorization table", () => {
  it("is the routes' own declarations: one rule per route, none elsewhere", () => {
    const routes = [...restRoutes, ...oauthRoutes];
    const keys = routes.map((r) => `${r.method} ${r.path}`);
    // No route is declared twice (two declarations could disagree).
    expect(keys.filter((key, i) => keys.indexOf(key) !== i)).toEqual([]);
    expect(Object.keys(restRules).sort()).toEqual([...keys].sort());
    for (const route of routes) {
      expect(isScope(route.scope) || kinds.includes(route.scope), route.path).toBe(true);
      expect(restRuleOf(route.method, route.path)).toBe(route.scope);
    }
    expect(restRuleOf("GET", "/v1/no-such-route")).toBeUndefined();
    expect(restRuleOf("GET", "constructor")).toBeUndefined();
  });

  it("lists the public routes explicitly, and only these", () => {
    const open = [...restRoutes, ...oauthRoutes]
      .filter((r) => r.scope === "public")
      .map((r) => `${r.method} ${r.path}`)
      .sort();
    expect(open).toEqual([
      `GET ${jwksPath}`,
      "GET /v1",
      "GET /v1/agent-card",
      "GET /v1/health",
      `POST ${tokenPath}`,
    ]);
  });

  it("serves no route as internal or as any-credential; the 501 answers need a credential", () => {
    expect(restRoutes.filter((r) => r.scope === "internal" || r.scope === "authenticated")).toEqual(
      [],
    );
    const notServed = notServedRoutes(restRoutes);
    expect(notServed.length).toBeGreaterThan(0);
    expect(notServed.every((r) => r.scope === "authenticated" && r.notServed)).toBe(true);
    expect(authorize([], "authenticated").allowed).toBe(true);
  });

  it("keeps the rules the surface relies on", () => {
    const rule = (key: string) => {
      const [method, path] = key.split(" ") as [string, string];
      return restRuleOf(method, path);
    };
    expect(rule("POST /v1/workspaces")).toBe("admin");
    expect(rule("PATCH /v1/workspaces/{workspace_id}")).toBe("admin");
    expect(rule("POST /v1/workspaces/{workspace_id}/archive")).toBe("admin");
    expect(rule("POST /v1/api-keys")).toBe("keys:admin");
    expect(rule("POST /v1/oauth-clients/{client_id}/revoke")).toBe("keys:admin");
    expect(rule("GET /v1/sessions/{session_id}/ws")).toBe("events:read");
    expect(rule("POST /v1/receipts/verify")).toBe("receipts:read");
    expect(rule("POST /v1/connectors/{connector_id}/deliveries")).toBe("connectors:deliver");
  });

  it("has a rule for every method of every RPC service", async () => {
    const services = await allServices();
    // The contracts this repository serves today, at least.
    expect(services.map((s) => s.typeName)).toEqual(
      expect.arrayContaining([
        "grpc.health.v1.Health",
        "trellis.tasks.v1.TaskService",
        "trellis.chat.v1.ChatService",
        "trellis.receipts.v1.ReceiptService",
      ]),
    );
    const missing = services.flatMap((service) =>
      service.methods
        .filter((m) => rpcRuleOf(service.typeName, m.name) === undefined)
        .map((m) => `${service.typeName}/${m.name}`),
    );
    expect(missing).toEqual([]);
  });

  it("has no RPC rule for a method that does not exist", async () => {
    const services = new Map((await allServices()).map((s) => [s.typeName, s]));
    const stale = Object.keys(rpcRules).filter((key) => {
      const [service, method] = key.split("/") as [string, string];
      const desc = services.get(service);
      if (desc === undefined) return true;
      return method !== "*" && !desc.methods.some((m) => m.name === method);
    });
    expect(stale).toEqual([]);
  });

  it("keeps health and reflection open and everything of trellis.* closed to anonymous callers", async () => {
    for (const service of await allServices()) {
      for (const method of service.methods) {
        const rule = rpcRuleOf(service.typeName, method.name);
        if (service.typeName.startsWith("grpc.")) expect(rule).toBe("public");
        else expect(rule).not.toBe("public");
      }
    }
  });

  it("names only known scopes", () => {
    const rules = [...Object.values(restRules), ...Object.values(rpcRules)];
    const unknown = rules.filter((r) => !kinds.includes(r) && !isScope(r));
    expect(unknown).toEqual([]);
    // Every scope guards something.
    const used = new Set(rules);
    expect(scopeNames.filter((s) => !used.has(s))).toEqual([]);
  });

  it("decides closed when in doubt", () => {
    expect(authorize(["*"], undefined).allowed).toBe(false);
    expect(authorize(["*"], "internal").allowed).toBe(false);
    expect(authorize(["tasks:*"], "admin").allowed).toBe(false);
    expect(authorize(["*"], "admin").allowed).toBe(true);
    expect(authorize([], "public").allowed).toBe(true);
    expect(authorize(["tasks:read"], "tasks:write")).toEqual({
      allowed: false,
      message: "this credential lacks the scope tasks:write",
      requiredScope: "tasks:write",
    });
    expect(authorize(["tasks:*"], "tasks:write").allowed).toBe(true);
  });

  it("keeps keys:admin a superset of the webhook scopes, and nothing else", () => {
    expect(authorize(["keys:admin"], "webhooks:read").allowed).toBe(true);
    expect(authorize(["keys:admin"], "webhooks:write").allowed).toBe(true);
    expect(authorize(["keys:*"], "webhooks:write").allowed).toBe(true);
    expect(authorize(["webhooks:read"], "webhooks:write").allowed).toBe(false);
    expect(authorize(["webhooks:*"], "webhooks:write").allowed).toBe(true);
    expect(authorize(["webhooks:*"], "keys:admin").allowed).toBe(false);
    expect(restRuleOf("POST", "/v1/webhooks")).toBe("webhooks:write");
    expect(restRuleOf("GET", "/v1/webhooks/{webhook_id}/deliveries")).toBe("webhooks:read");
  });
});
