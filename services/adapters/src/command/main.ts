// A command adapter worker process:
//
//   tsx services/adapters/src/command/main.ts --backend my-bot [--attachments] -- python3 bot.py
//
// NATS_URL, TRELLIS_NATS_PREFIX, TRELLIS_WORKER_* as for every worker
// (@trellis/adapter-sdk runWorkerMain).
import { parseArgs } from "node:util";
import { runWorkerMain } from "@trellis/adapter-sdk";
import { createCommandAdapter } from "./command-adapter.js";

const usage =
  "usage: main.ts --backend <id> [--attachments] [--trace-depth minimal|standard|detailed] -- <command> [args…]";
function parse() {
  try {
    return parseArgs({
      options: {
        backend: { type: "string" },
        attachments: { type: "boolean" },
        "trace-depth": { type: "string" },
      },
      allowPositionals: true,
    });
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${usage}\n`);
    process.exit(2);
  }
}
const { values, positionals } = parse();
const depth = values["trace-depth"];
if (!values.backend || positionals.length === 0) {
  process.stderr.write(`${usage}\n`);
  process.exit(2);
}
if (depth !== undefined && depth !== "minimal" && depth !== "standard" && depth !== "detailed") {
  process.stderr.write(`--trace-depth must be minimal, standard or detailed\n${usage}\n`);
  process.exit(2);
}
await runWorkerMain(
  createCommandAdapter({
    backendId: values.backend,
    command: positionals,
    capabilities: {
      ...(values.attachments ? { attachments: true } : {}),
      ...(depth ? { traceDepth: depth } : {}),
    },
  }),
);
