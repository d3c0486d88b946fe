/**
 * `trellis keys create|list|revoke`: manage the API keys of a workspace.
 *
 * Through a running gateway (REST `/v1/api-keys`, needs a key with
 * `keys:admin`, by default the admin key), or straight in its PostgreSQL
 * database with `--database-url` (no gateway needed; e.g. to recover when the
 * admin key is lost). Keys are stored hashed; a new key is printed once and
 * never again.
 *
 *   trellis keys create --name ci --scopes "sessions:read tasks:write" [--workspace W] [--actor A]
 *                       [--agent-ids "agent_a agent_b"]
 *   trellis keys list [--workspace W] [--all]
 *   trellis keys revoke <key id>
 *
 * Options: --url URL (default TRELLIS_URL, else http://127.0.0.1:$TRELLIS_PORT|8080),
 * --api-key KEY (default TRELLIS_API_KEY, else $TRELLIS_DATA_DIR/data/admin-api-key),
 * --database-url URL (direct), --json. Exit 0 on success, 1 on a refusal, 2 on
 * a usage or connection error.
 *
 * The gateway's package (scopes, key stores) and the database client are
 * loaded once the arguments are known to be well-formed.
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { ApiKeyRecord } from "@trellis/gateway";
import { isUsageError, parseCommand } from "./args.js";
import { keysUsage } from "./usage.js";

const protocolVersion = "agents-protocol-2026-04-25";

/** Where the command writes (tests capture it). */
export interface KeysIo {
  out(text: string): void;
  err(text: string): void;
}

const processIo: KeysIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

const usage = keysUsage;

const keysOptions = {
  name: { type: "string" },
  scopes: { type: "string" },
  workspace: { type: "string" },
  actor: { type: "string" },
  "agent-ids": { type: "string" },
  all: { type: "boolean" },
  url: { type: "string" },
  "api-key": { type: "string" },
  "database-url": { type: "string" },
  json: { type: "boolean" },
} as const;

/** An API key as both paths report it. */
interface KeyView {
  id: string;
  name: string;
  prefix: string;
  actor_id: string;
  workspace_id: string;
  scopes: string[];
  created_at: string;
  revoked_at: string | null;
  /** The agents the key may use; null: every agent (only shown where known). */
  agent_ids?: string[] | null;
  key?: string;
}

class UsageError extends Error {}
class Refused extends Error {}

function viewOf(record: ApiKeyRecord, key?: string): KeyView {
  return {
    id: record.id,
    name: record.name,
    prefix: record.prefix,
    actor_id: record.actorId,
    workspace_id: record.workspaceId,
    scopes: [...record.scopes],
    created_at: record.createdAt.toISOString(),
    revoked_at: record.revokedAt?.toISOString() ?? null,
    ...(key === undefined ? {} : { key }),
  };
}

/** What a subcommand does, over HTTP or in the database. */
interface KeyBackend {
  create(input: {
    name: string;
    scopes: string[];
    workspace?: string;
    actor?: string;
    agentIds?: string[];
  }): Promise<KeyView>;
  list(input: { workspace?: string; all: boolean }): Promise<KeyView[]>;
  revoke(id: string): Promise<KeyView>;
  close(): Promise<void>;
}

async function adminKeyFrom(source: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (source.TRELLIS_API_KEY) return source.TRELLIS_API_KEY;
  const { adminKeyFile } = await import("@trellis/gateway");
  const file = resolve(source.TRELLIS_DATA_DIR ?? ".trellis", "data", adminKeyFile);
  return existsSync(file) ? readFileSync(file, "utf8").trim() : undefined;
}

function httpBackend(baseUrl: string, apiKey: string): KeyBackend {
  async function call(method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          "harn-agents-protocol-version": protocolVersion,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      const cause =
        error instanceof Error && error.cause instanceof Error
          ? error.cause.message
          : String(error);
      throw new UsageError(`cannot reach Trellis at ${baseUrl} (${cause}); is it running? (--url)`);
    }
    const text = await response.text();
    let parsed: { error?: { code?: string; message?: string } } | undefined;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new UsageError(`${baseUrl}${path} answered ${response.status} with non-JSON content`);
    }
    if (!response.ok) {
      throw new Refused(
        `${response.status} ${parsed?.error?.code ?? ""}: ${parsed?.error?.message ?? text}`,
      );
    }
    return parsed;
  }
  return {
    async create(input) {
      return (await call("POST", "/v1/api-keys", {
        name: input.name,
        scopes: input.scopes,
        ...(input.workspace ? { workspace_id: input.workspace } : {}),
        ...(input.actor ? { actor_id: input.actor } : {}),
        ...(input.agentIds ? { agent_ids: input.agentIds } : {}),
      })) as KeyView;
    },
    async list(input) {
      const query = new URLSearchParams();
      if (input.workspace) query.set("workspace_id", input.workspace);
      if (input.all) query.set("include_revoked", "true");
      const suffix = query.size > 0 ? `?${query}` : "";
      return ((await call("GET", `/v1/api-keys${suffix}`)) as { data: KeyView[] }).data;
    },
    async revoke(id) {
      return (await call("POST", `/v1/api-keys/${encodeURIComponent(id)}/revoke`)) as KeyView;
    },
    async close() {},
  };
}

async function databaseBackend(url: string): Promise<KeyBackend> {
  const [
    { AgentPolicyStore, agentPolicyMigrations, gatewayMigrations, PostgresKeyStore },
    { createDatabase, migrate },
  ] = await Promise.all([import("@trellis/gateway"), import("@trellis/storage")]);
  let db: Awaited<ReturnType<typeof createDatabase>>;
  try {
    db = await createDatabase({
      kind: "postgres",
      url,
      poolSize: 1,
      applicationName: "trellis-keys",
    });
    // The gateway's own migrations (idempotent), so this works before its first start too.
    await migrate(db, {
      schema: "gateway",
      migrations: { ...gatewayMigrations, ...agentPolicyMigrations },
    });
  } catch (error) {
    throw new UsageError(
      `cannot use the database (${error instanceof Error ? error.message : String(error)})`,
    );
  }
  const keys = new PostgresKeyStore(db, "gateway");
  const policies = new AgentPolicyStore(db, "gateway");
  return {
    async create(input) {
      const created = await keys.create({
        name: input.name,
        actorId: input.actor ?? input.name,
        workspaceId: input.workspace ?? "default",
        scopes: input.scopes,
      });
      if (input.agentIds !== undefined) {
        try {
          await policies.set(`api_key:${created.record.id}`, input.agentIds);
        } catch (error) {
          // Fail closed: a key meant to be restricted must not stay usable without it.
          await keys.revoke(created.record.id).catch(() => undefined);
          throw error;
        }
      }
      return {
        ...viewOf(created.record, created.key),
        agent_ids: input.agentIds ? [...input.agentIds] : null,
      };
    },
    async list(input) {
      const records = await keys.list({
        ...(input.workspace ? { workspaceId: input.workspace } : {}),
        includeRevoked: input.all,
      });
      return records.map((r) => viewOf(r));
    },
    async revoke(id) {
      const record = await keys.get(id);
      if (record === undefined) throw new Refused(`no API key ${JSON.stringify(id)}`);
      await keys.revoke(id);
      return viewOf((await keys.get(id)) ?? record);
    },
    close: () => db.close(),
  };
}

function table(keys: readonly KeyView[]): string {
  const rows = [
    ["ID", "NAME", "WORKSPACE", "ACTOR", "SCOPES", "PREFIX", "CREATED", "REVOKED"],
    ...keys.map((k) => [
      k.id,
      k.name,
      k.workspace_id,
      k.actor_id,
      k.scopes.join(" "),
      `${k.prefix}…`,
      k.created_at,
      k.revoked_at ?? "-",
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return `${rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n")}\n`;
}

/** `trellis keys …`; returns the exit code. */
export async function runKeys(
  source: NodeJS.ProcessEnv,
  args: readonly string[],
  io: KeysIo = processIo,
): Promise<number> {
  let backend: KeyBackend | undefined;
  try {
    let parsed: ReturnType<typeof parseCommand<typeof keysOptions>>;
    try {
      parsed = parseCommand({ name: "keys", usage, options: keysOptions, maxPositionals: 2 }, args);
    } catch (error) {
      throw new UsageError(
        isUsageError(error) || error instanceof Error ? error.message : String(error),
      );
    }
    if (parsed.help || parsed.positionals[0] === "help") {
      io.out(usage);
      return 0;
    }
    const { values, positionals } = parsed;
    const [subcommand, ...rest] = positionals;
    if (subcommand !== "create" && subcommand !== "list" && subcommand !== "revoke") {
      throw new UsageError(
        subcommand === undefined
          ? "give a subcommand"
          : `unknown subcommand ${JSON.stringify(subcommand)}`,
      );
    }
    // Check the request before connecting anywhere.
    let scopes: string[] = [];
    let agentIds: string[] | undefined;
    if (subcommand === "create") {
      if (!values.name) throw new UsageError("create needs --name");
      scopes = (values.scopes ?? "").split(/[\s,]+/).filter((s) => s !== "");
      if (scopes.length === 0) throw new UsageError("create needs --scopes");
      const { isGrantableScope, parseAgentIds } = await import("@trellis/gateway");
      const bad = scopes.find((s) => !isGrantableScope(s));
      if (bad !== undefined) throw new UsageError(`unknown scope ${JSON.stringify(bad)}`);
      if (values["agent-ids"] !== undefined) {
        try {
          agentIds = parseAgentIds(values["agent-ids"].split(/[\s,]+/).filter((a) => a !== ""));
        } catch (error) {
          throw new UsageError(`--agent-ids: ${error instanceof Error ? error.message : error}`);
        }
      }
    }
    if (subcommand === "revoke" && rest.length !== 1) {
      throw new UsageError("revoke needs exactly one key id");
    }

    if (values["database-url"]) {
      backend = await databaseBackend(values["database-url"]);
    } else {
      const apiKey = values["api-key"] ?? (await adminKeyFrom(source));
      if (!apiKey) {
        throw new UsageError(
          "no API key: give --api-key (or TRELLIS_API_KEY), or --database-url to work in the database",
        );
      }
      const url = (
        values.url ??
        source.TRELLIS_URL ??
        `http://127.0.0.1:${source.TRELLIS_PORT ?? "8080"}`
      ).replace(/\/+$/, "");
      backend = httpBackend(url, apiKey);
    }

    switch (subcommand) {
      case "create": {
        const created = await backend.create({
          name: values.name as string,
          scopes,
          ...(values.workspace ? { workspace: values.workspace } : {}),
          ...(values.actor ? { actor: values.actor } : {}),
          ...(agentIds ? { agentIds } : {}),
        });
        if (values.json) {
          io.out(`${JSON.stringify(created, null, 2)}\n`);
        } else {
          io.out(
            [
              `API key ${created.id} created for workspace ${created.workspace_id} (${created.scopes.join(" ")}).`,
              ...(created.agent_ids
                ? [`Restricted to agents: ${created.agent_ids.join(" ")}.`]
                : []),
              "Shown once; keep it safe:",
              `  ${created.key ?? "(not returned)"}`,
              "",
            ].join("\n"),
          );
        }
        return 0;
      }
      case "list": {
        const listed = await backend.list({
          ...(values.workspace ? { workspace: values.workspace } : {}),
          all: values.all ?? false,
        });
        io.out(values.json ? `${JSON.stringify(listed, null, 2)}\n` : table(listed));
        return 0;
      }
      case "revoke": {
        const revoked = await backend.revoke(rest[0] as string);
        io.out(
          values.json
            ? `${JSON.stringify(revoked, null, 2)}\n`
            : `API key ${revoked.id} revoked at ${revoked.revoked_at}\n`,
        );
        return 0;
      }
    }
    return 2;
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`trellis keys: ${error.message}\n\n${usage}`);
      return 2;
    }
    if (error instanceof Refused) {
      io.err(`trellis keys: ${error.message}\n`);
      return 1;
    }
    throw error;
  } finally {
    await backend?.close();
  }
}
