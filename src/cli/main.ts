/**
 * The `trellis` command line.
 *
 *   trellis dev      every service in one process on PGlite (same as `npm start`)
 *   trellis mesh     every service as its own process on Postgres + NATS
 *   trellis health   ask a gateway about every service and worker; print a table
 *   trellis receipts verify <id|file>   verify a receipt, online or offline
 *   trellis keys create|list|revoke     manage the API keys of a workspace
 *   trellis serve <service>   run one service as its own process (the container entry point)
 *   trellis migrate  bring every service's PostgreSQL schema up to date, then exit
 */
import { isUsageError, printUsage, wantsHelp } from "./args.js";
import { commandUsage } from "./usage.js";

const usage = `Usage: trellis <command> [options]

Commands:
  dev       Run Trellis embedded: every service in one process on PGlite.
  mesh      Run every service as its own process against PostgreSQL and NATS
            (needs DATABASE_URL).
  health    Check a running Trellis through its gateway: every service and
            adapter worker of a mesh, or the embedded process.
  receipts verify <ID|FILE>
            Verify a receipt: by id online, or an exported file offline with
            --public-key.
  serve <SERVICE>
            Run one service as its own process (the container entry point).
  migrate   Bring every service's PostgreSQL schema up to date, then exit.
  keys create|list|revoke
            Manage the API keys of a workspace.
  adapters conformance --backend ID
            Check a live agent backend against the adapter checklist.
  help      Show this help.

\`trellis <command> --help\` shows a command's options and environment; it
never starts anything.
`;

const [command, ...rest] = process.argv.slice(2);

async function run(): Promise<number> {
  // Help is answered before the command is even loaded.
  const known = command === undefined ? undefined : commandUsage[command];
  if (known !== undefined && wantsHelp(rest)) return printUsage(known);
  switch (command) {
    // Each command is loaded when it is run: help and usage errors stay fast.
    case "dev":
      return (await import("./dev.js")).runDev(process.env, rest);
    case "mesh":
      return (await import("./mesh.js")).runMesh(process.env, rest);
    case "health":
      return (await import("./health.js")).runHealth(process.env, rest);
    case "receipts":
      return (await import("./receipts.js")).runReceipts(process.env, rest);
    case "serve":
      return (await import("./serve.js")).runServeCommand(process.env, rest);
    case "migrate":
      return (await import("./migrate.js")).runMigrateCommand(process.env, rest);
    case "keys":
      return (await import("./keys.js")).runKeys(process.env, rest);
    case "adapters":
      return (await import("./adapters.js")).runAdapters(process.env, rest);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      return printUsage(usage);
    default:
      process.stderr.write(`trellis: unknown command ${JSON.stringify(command)}\n\n${usage}`);
      return 2;
  }
}

/** Every command ends here: usage errors exit 2, other failures 1, one line each. */
async function main(): Promise<number> {
  try {
    return await run();
  } catch (error) {
    if (isUsageError(error)) {
      process.stderr.write(`trellis ${error.command}: ${error.message}\n\n${error.usage}`);
      return 2;
    }
    process.stderr.write(`trellis: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

main().then((code) => {
  if (code === 0) return;
  process.exitCode = code;
  // A failed start may leave handles open (a database, timers): exit anyway,
  // once what is buffered has been written.
  setTimeout(() => process.exit(code), 100).unref();
});
