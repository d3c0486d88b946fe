/**
 * The `trellis` command line.
 *
 *   trellis dev      every service in one process on PGlite (same as `npm start`)
 *   trellis mesh     every service as its own process on Postgres + NATS
 *   trellis health   ask every service's gRPC health endpoint; print a table
 *   trellis receipts verify <id|file>   verify a receipt, online or offline
 *   trellis keys create|list|revoke     manage the API keys of a workspace
 *   trellis serve <service>   run one service as its own process (the container entry point)
 *   trellis migrate  bring every service's PostgreSQL schema up to date, then exit
 */
import { parseArgs } from "node:util";
import { runDev } from "./dev.js";
import { runHealth } from "./health.js";
import { runKeys } from "./keys.js";
import { runMesh } from "./mesh.js";
import { runMigrate } from "./migrate.js";
import { runReceiptsVerify } from "./receipts.js";
import { runServe, servableServices } from "./serve.js";

const usage = `Usage: trellis <command> [options]

Commands:
  dev       Run Trellis embedded: every service in one process on PGlite.
            Env: TRELLIS_PORT (8080), TRELLIS_HOST (127.0.0.1), TRELLIS_DATA_DIR (./.trellis)
  mesh      Run every service as its own process against Postgres and NATS.
            Env: DATABASE_URL, NATS_URL, TRELLIS_NATS_PREFIX
  health    Check the health of a running Trellis and print a table.
            Options: --url URL (repeatable; default: every service's TRELLIS_<NAME>_URL,
            else the embedded http://127.0.0.1:8080)
  receipts verify <id|file>
            Verify a receipt. By id: Trellis re-checks the stored receipt (hash,
            chain links, signature). A file (an exported receipt) with
            --public-key FILE (PEM or JWK): checked offline, nothing is sent.
            Options: --public-key FILE, --url URL (default TRELLIS_URL, else
            http://127.0.0.1:8080), --schema FILE (receipt JSON Schema),
            --api-key KEY (default TRELLIS_API_KEY), --json
  serve <service>
            Run one service as its own process (distributed mode), one of:
            ${servableServices.join(", ")}; default TRELLIS_SERVICE. Env as for mesh,
            plus PORT and TRELLIS_HOST (0.0.0.0 in a container).
  migrate [--service NAME]...
            Bring the PostgreSQL schemas of every service (or the named ones) up
            to date, then exit. Env: DATABASE_URL, TRELLIS_STARTUP_TIMEOUT (60s)
  keys create|list|revoke
            Manage API keys (stored hashed; a new key is printed once):
            keys create --name NAME --scopes "sessions:read tasks:write" [--workspace ID]
              [--agent-ids "AGENT ..."]
            keys list [--workspace ID] [--all];  keys revoke KEY_ID
            Through a gateway (--url, --api-key; default the admin key) or
            directly in its database (--database-url). trellis keys help: details
  help      Show this help.
`;

const [command, ...rest] = process.argv.slice(2);

async function main(): Promise<number> {
  switch (command) {
    case "dev":
      return runDev(process.env);
    case "mesh":
      return runMesh(process.env);
    case "health": {
      const { values } = parseArgs({
        args: rest,
        options: { url: { type: "string", multiple: true } },
      });
      return runHealth(process.env, values.url ?? []);
    }
    case "receipts": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: {
          "public-key": { type: "string" },
          url: { type: "string" },
          schema: { type: "string" },
          "api-key": { type: "string" },
          json: { type: "boolean" },
        },
      });
      const [subcommand, target] = positionals;
      if (subcommand !== "verify") {
        process.stderr.write(
          `trellis receipts: unknown subcommand ${JSON.stringify(subcommand)}\n\n${usage}`,
        );
        return 2;
      }
      return runReceiptsVerify(process.env, target, {
        ...(values["public-key"] ? { publicKey: values["public-key"] } : {}),
        ...(values.url ? { url: values.url } : {}),
        ...(values.schema ? { schema: values.schema } : {}),
        ...(values["api-key"] ? { apiKey: values["api-key"] } : {}),
        ...(values.json ? { json: true } : {}),
      });
    }
    case "serve": {
      const { positionals } = parseArgs({ args: rest, allowPositionals: true, options: {} });
      if (positionals.length > 1) {
        process.stderr.write(`trellis serve: one service at a time\n\n${usage}`);
        return 2;
      }
      return runServe(process.env, positionals[0]);
    }
    case "migrate": {
      const { values } = parseArgs({
        args: rest,
        options: { service: { type: "string", multiple: true } },
      });
      return runMigrate(process.env, values.service ?? []);
    }
    case "keys":
      return runKeys(process.env, rest);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(usage);
      return 0;
    default:
      process.stderr.write(`trellis: unknown command ${JSON.stringify(command)}\n\n${usage}`);
      return 2;
  }
}

main().then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`trellis: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
