// The one authorization table (src/auth/scope-table.ts) covers every REST
// route and every RPC method the public port can serve — and nothing else.
// Adding a route or an RPC without a rule fails here (and is refused at run
// time: no rule means closed).
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { DescService } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { jwksPath, tokenPath } from "../src/auth/oauth-endpoint.js";
import { authorize, restRuleOf, restRules, rpcRuleOf, rpcRules } from "../src/auth/scope-table.js";
import { isScope, scopeNames } from "../src/domain/scopes.js";
import { restRoutes } from "../src/http/routes/index.js";

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

/** The OAuth endpoints, served outside the REST router. */
const oauthRoutes = [
  { method: "POST", path: tokenPath },
  { method: "GET", path: jwksPath },
];

describe("the authorization table", () => {
  it("has a rule for every REST route", () => {
    const missing = [...restRoutes, ...oauthRoutes]
      .filter((r) => restRuleOf(r.method, r.path) === undefined)
      .map((r) => `${r.method} ${r.path}`);
    expect(missing).toEqual([]);
  });

  it("has no REST rule for a route that does not exist", () => {
    const served = new Set([...restRoutes, ...oauthRoutes].map((r) => `${r.method} ${r.path}`));
    expect(Object.keys(restRules).filter((key) => !served.has(key))).toEqual([]);
  });

  it("agrees with what a route declares about itself", () => {
    const disagreeing = restRoutes.flatMap((route) => {
      const rule = restRuleOf(route.method, route.path);
      const problems: string[] = [];
      if (route.scope !== undefined && route.scope !== rule) {
        problems.push(`${route.method} ${route.path}: declares ${route.scope}, table says ${rule}`);
      }
      if (route.public === true && rule !== "public") {
        problems.push(`${route.method} ${route.path}: declares public, table says ${rule}`);
      }
      return problems;
    });
    expect(disagreeing).toEqual([]);
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
    const unknown = rules.filter(
      (r) => !["public", "admin", "internal"].includes(r) && !isScope(r),
    );
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
