/**
 * The usage text of every `trellis` command, kept apart from the commands so
 * that `--help` prints without loading anything else (`main.ts`).
 */

/** `trellis dev --help`. */
export const devUsage = `Usage: trellis dev [-h]

Run Trellis embedded: every service in one process on PGlite (the same as
\`npm start\`), until Ctrl-C. Data survives a restart.

Environment:
  TRELLIS_PORT                     port (default 8080)
  TRELLIS_HOST                     address (default 127.0.0.1)
  TRELLIS_DATA_DIR                 data directory (default ./.trellis)
  TRELLIS_API_KEY                  the admin API key (default: generated once,
                                   kept in <data dir>/data/admin-api-key)
  TRELLIS_EVENT_WINDOW             events kept in memory (default 20000)
  TRELLIS_CONSUMER_POSITION_FLUSH  consumer position write delay (default 1s)
  OTEL_*                           where traces and metrics go
`;

/** `trellis mesh --help`. */
export const meshUsage = `Usage: trellis mesh [-h]

Run the services as processes against PostgreSQL and NATS JetStream (gateway
on TRELLIS_PORT, the others on free ports, chat in the tasks process, plus
adapter workers), until Ctrl-C. Prints the gateway URL, the operator UI URL and, when the
gateway makes one, the admin API key. Logs in .trellis/mesh-logs.

Environment:
  DATABASE_URL                  PostgreSQL database (required; each service keeps
                                its own schema), e.g.
                                postgres://postgres@127.0.0.1:5432/trellis
  NATS_URL                      NATS with JetStream (default nats://127.0.0.1:4222)
  TRELLIS_NATS_PREFIX           subject / stream prefix (default trellis)
  TRELLIS_PORT                  the gateway's port (default 8080)
  TRELLIS_API_KEY               the admin API key (default: generated once)
  TRELLIS_MESH_ADAPTER_WORKERS  built-in adapter workers (default 1)
  TRELLIS_MESH_TOGETHER         services sharing a process, groups split by ";"
                                (default tasks,chat; none: each its own)
`;

/** `trellis health --help`. */
export const healthUsage = `Usage: trellis health [-h] [--url URL]... [--json]

Check a running Trellis and print one row per service and adapter worker.
Given a gateway (of a mesh, or the embedded process), it lists what that
gateway sees behind it (GET /v1/health); given any other service, that
service's gRPC health. Exit code 0 when every row is SERVING, else 1.

Options:
  --url URL    a gateway or a service (repeatable; default TRELLIS_URL, else
               http://127.0.0.1:$TRELLIS_PORT, port 8080)
  --json       machine-readable output
  -h, --help   show this help
`;

/** `trellis receipts --help`. */
export const receiptsUsage = `Usage: trellis receipts verify [-h] <ID|FILE> [options]

Verify a receipt. Exit code 0 when valid, 1 when not, 2 on a usage or
connection error.

  verify ID                Trellis re-checks the stored receipt: hash, stored
                           bytes, chain links, signature (online).
  verify FILE --public-key KEY
                           An exported receipt checked offline, nothing sent.
                           KEY: a PEM, a JWK, a JWKS, or the answer of
                           GET /v1/receipts/public-keys saved as it comes.
  verify FILE --url URL    Trellis checks the document (online).

Options:
  --public-key FILE  public key(s) for the offline check
  --url URL          a running Trellis (default TRELLIS_URL, else
                     http://127.0.0.1:$TRELLIS_PORT, port 8080)
  --api-key KEY      a key with receipts:read (default TRELLIS_API_KEY)
  --schema FILE      also validate against the receipt JSON Schema (offline)
  --json             machine-readable output
  -h, --help         show this help
`;

/** `trellis serve --help`. */
export const serveUsage = `Usage: trellis serve [-h] [SERVICE[,SERVICE...]]

Run one service as its own process (distributed mode; the container entry
point). SERVICE is one of: gateway, chat, tasks, receipts, adapters,
adapter-worker
(default: TRELLIS_SERVICE). Several names joined by commas run in one process
on the first one's port and call each other in memory (e.g. tasks,chat:
chat's calls to tasks cost no hop); gateway and adapter-worker run alone.

Environment: DATABASE_URL (required), NATS_URL, TRELLIS_MESH_SECRET (or _FILE,
required), PORT, TRELLIS_HOST (0.0.0.0 in a container), TRELLIS_<SERVICE>_URL;
see the README's distributed mode table.
`;

/** `trellis migrate --help`. */
export const migrateUsage = `Usage: trellis migrate [-h] [--service NAME]...

Bring the PostgreSQL schema of every service (or of each --service NAME:
gateway, chat, tasks, receipts, adapters) up to date, then exit. Safe to run
while services start (they take the same lock).

Environment:
  DATABASE_URL             PostgreSQL (required)
  TRELLIS_STARTUP_TIMEOUT  how long to wait for PostgreSQL (default 60s)
`;

/** `trellis keys --help`. */
export const keysUsage = `Usage: trellis keys <create|list|revoke> [options]

  create --name NAME --scopes "SCOPE ..." [--workspace ID] [--actor ID]
         [--agent-ids "AGENT ..."]
         Scopes: a named scope (sessions:read, tasks:write, keys:admin, ...),
         <area>:* or * (admin only). --agent-ids restricts the key to those
         agents (default: every agent of the workspace). The key is printed once.
  list   [--workspace ID] [--all]   (--all: revoked keys too)
  revoke KEY_ID

  --url URL         a running gateway (default TRELLIS_URL, else http://127.0.0.1:8080)
  --api-key KEY     a key with keys:admin (default TRELLIS_API_KEY, else the
                    embedded admin key file under TRELLIS_DATA_DIR)
  --database-url U  work in the gateway's PostgreSQL database directly
  --json            machine-readable output
  -h, --help        show this help
`;

/** Usage by command name. */
/** `trellis adapters --help`. */
export const adaptersUsage = `Usage: trellis adapters conformance [-h] --backend ID [options]

Run the adapter conformance checklist (BYOH Appendix B) against a live,
registered backend through a running Trellis's public API, and print one
line per item: pass, fail or skip, and why (what was degraded, what was
refused). Exit code 0 when nothing failed, 1 when an item failed, 2 on a
usage or connection error.

Options:
  --backend ID        the backend to check (required)
  --url URL           the gateway (default TRELLIS_URL, else
                      http://127.0.0.1:$TRELLIS_PORT, port 8080)
  --api-key KEY       an admin key (default TRELLIS_API_KEY, else
                      $TRELLIS_DATA_DIR/data/admin-api-key)
  --input TEXT        a simple message it answers with text (default "Say hello.")
  --slow-input TEXT   a message it takes over 3 s to answer (timeout and
                      cancel items; skipped without it)
  --definition JSON   the test agent's definition (default {})
  --json              machine-readable output
  -h, --help          show this help
`;

export const commandUsage: Readonly<Record<string, string>> = {
  dev: devUsage,
  mesh: meshUsage,
  health: healthUsage,
  receipts: receiptsUsage,
  serve: serveUsage,
  migrate: migrateUsage,
  keys: keysUsage,
  adapters: adaptersUsage,
};
