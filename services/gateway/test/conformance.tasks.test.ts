// The Harn Core suite against the real tasks service (embedded, PGlite):
// what a black-box client of `npm start` sees.

import type { harnClient } from "@trellis/gateway/testing";
import { tasksService } from "@trellis/tasks";
import { describeHarnCore } from "./support/conformance.js";
import { waitGraph } from "./support/ui-fixtures.js";

type Api = ReturnType<typeof harnClient>;

async function sessionWithPersona(api: Api, name: string, definition: object): Promise<string> {
  const persona = await api.post("/v1/personas", {
    name,
    version: "1",
    entry_workflow: "scripted",
    description: `${name} test agent`,
    autonomy_tier: "act_auto",
    receipt_policy: "optional",
    definition,
  });
  if (persona.status !== 201) throw new Error(`persona: ${persona.status} ${persona.text}`);
  const session = await api.post("/v1/sessions", {
    workspace_id: "default",
    persona_id: persona.json.id,
  });
  if (session.status !== 201) throw new Error(`session: ${session.status} ${session.text}`);
  return session.json.id;
}

describeHarnCore("gateway over the tasks service", {
  services: () => [tasksService],
  slowTask: async (api) => ({
    sessionId: await sessionWithPersona(api, "slow", {
      entry: "think",
      nodes: {
        think: { update: { messages: [{ role: "assistant", content: "late" }], delay_ms: 60_000 } },
      },
      edges: [{ from: "think", to: "END" }],
    }),
    input: { role: "user", parts: [{ type: "text", text: "take your time" }] },
  }),
  waitingTask: async (api) => ({
    sessionId: await sessionWithPersona(api, "asker", waitGraph),
    input: { role: "user", parts: [{ type: "text", text: "ask me" }] },
  }),
});
