// BYOH Appendix B for the A2A backend, against a remote agent built with
// @a2a-js/sdk (testkit) on loopback (allowed explicitly).
import { fileURLToPath } from "node:url";
import { startA2aTestAgent } from "@trellis/testkit/a2a-server";
import { afterAll } from "vitest";
import { createA2aAdapter } from "../src/a2a/a2a-adapter.js";
import { describeAdapterContract } from "../src/conformance/adapter.contract.js";

const TOKEN = "conformance-token";
const agent = await startA2aTestAgent({ token: TOKEN });
afterAll(() => agent.close());

describeAdapterContract("a2a (remote agent built with @a2a-js/sdk)", {
  create: () =>
    createA2aAdapter({
      allowPrivate: true,
      vaults: async () =>
        new Map([["vault_c", { allowed: true, secrets: new Map([["token", TOKEN]]) }]]),
    }),
  definition: { card_url: agent.cardUrl, credential: "vault_c/token" },
  sourceFiles: [
    fileURLToPath(new URL("../src/a2a/a2a-adapter.ts", import.meta.url)),
    fileURLToPath(new URL("../src/a2a/outbound.ts", import.meta.url)),
    fileURLToPath(new URL("../src/a2a/pinned-fetch.ts", import.meta.url)),
  ],
  // The card, the client, the stream, cancel and the vault credential: more than the guideline;
  // plus the fetch that pins connections to checked addresses (pinned-fetch.ts, ~125 lines,
  // shared with MCP's HTTP transport: its own abort handling, options for no redirects).
  maxLines: 785,
  scenarios: {
    simple: { input: "hello" },
    clarification: { input: "ask the weather", resumePayload: { answer: "Lyon" } },
    failure: { input: "fail now" },
    slow: { input: "slow work" },
  },
});
