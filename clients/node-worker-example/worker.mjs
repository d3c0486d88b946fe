// @ts-check
// An echo backend for Trellis in plain Node ESM, from the published SDK
// (`npm install ./trellis-adapter-sdk-<version>.tgz`), served over the gRPC
// worker protocol: it connects to the gateway, registers what it can do,
// claims turns, streams each word back and honours cancels.
//
//   TRELLIS_URL=http://127.0.0.1:8080 TRELLIS_API_KEY_FILE=.trellis/data/admin-api-key node worker.mjs
//
// Env: TRELLIS_URL (required), TRELLIS_API_KEY or TRELLIS_API_KEY_FILE (an
// admin key), TRELLIS_BACKEND (default "node-echo"), TRELLIS_WORD_DELAY_MS
// (default 0). Prints "worker <id> ready" once registered; stops on SIGTERM.
import { readFileSync } from "node:fs";
import {
  chatToMessage,
  defineAdapter,
  EXECUTION_SCHEMA_VERSION,
  runGrpcWorker,
  textOf,
} from "@trellis/adapter-sdk";

const url = process.env.TRELLIS_URL;
if (!url) {
  process.stderr.write("TRELLIS_URL is required (the gateway, e.g. http://127.0.0.1:8080)\n");
  process.exit(2);
}
const keyFile = process.env.TRELLIS_API_KEY_FILE;
const apiKey = process.env.TRELLIS_API_KEY || (keyFile ? readFileSync(keyFile, "utf8").trim() : "");
const delayMs = Number(process.env.TRELLIS_WORD_DELAY_MS ?? 0);
if (!Number.isFinite(delayMs) || delayMs < 0 || delayMs > 60_000) {
  process.stderr.write("TRELLIS_WORD_DELAY_MS must be a number of milliseconds, 0..60000\n");
  process.exit(2);
}

/** @param {number} ms @param {AbortSignal} signal */
const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });

const adapter = defineAdapter({
  backendId: process.env.TRELLIS_BACKEND ?? "node-echo",
  // Say only what this backend really does: routing trusts it.
  capabilities: {
    schemaVersion: EXECUTION_SCHEMA_VERSION,
    toolUse: "none",
    structuredToolCalls: false,
    continuationSupport: "none",
    approvalInterrupts: "none",
    traceDepth: "minimal",
    attachments: false,
    streaming: "native",
    maxContextStrategy: "small",
    notes: ["echoes the input, word by word"],
  },
  async run(request) {
    const words = textOf(request.input).split(/\s+/).filter(Boolean);
    const sent = [];
    for (const [i, word] of words.entries()) {
      if (request.signal.aborted) return { status: "cancelled", messages: [] };
      const text = i === 0 ? `echo: ${word}` : ` ${word}`;
      request.onEvent?.({ kind: "text_delta", text });
      sent.push(text);
      if (delayMs > 0) await sleep(delayMs, request.signal);
    }
    if (request.signal.aborted) return { status: "cancelled", messages: [] };
    const reply = sent.length ? sent.join("") : "echo:";
    return {
      status: "completed",
      messages: [chatToMessage({ role: "assistant", content: reply })],
    };
  },
});

const worker = await runGrpcWorker({ adapter, url, ...(apiKey ? { apiKey } : {}) });
process.stdout.write(`worker ${worker.workerId} ready\n`);
for (const signal of /** @type {const} */ (["SIGTERM", "SIGINT"])) {
  process.once(signal, () => {
    void worker.stop().then(() => process.exit(0));
  });
}
