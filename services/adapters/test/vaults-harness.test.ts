/**
 * The vault access policy, embedded (every service in one process on
 * PGlite, definitions as shipped): a harness tool reads
 * `<vault_id>/<name>` through `context.secret` — an agent the vault lists
 * gets the value (the tool proves it with a hash), another agent gets a
 * `secret_denied` tool error, a deleted secret is `secret_not_found`; the
 * value is never in the transcript, and it is sealed in the database.
 */
import { createHash } from "node:crypto";
import { type JsonObject, toJsonString } from "@bufbuild/protobuf";
import { VaultService } from "@trellis/contracts/adapters";
import { type Message, Role, TaskStatus } from "@trellis/contracts/core";
import { ListMessagesResponseSchema, SessionService } from "@trellis/contracts/tasks";
import { fixture, OPENAI_CHAT, type RecordedServer } from "@trellis/execution/testing";
import { textOf } from "@trellis/messages";
import type { EmbeddedTrellis } from "@trellis/platform";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createHarnessAgent,
  settledTurn,
  startEmbeddedHarness,
} from "./support/embedded-harness.js";
import { WEATHER_SECRET } from "./vault-tools.js";

const SECRET_VALUE = `wx-key-${createHash("sha256").update(String(Math.random())).digest("hex")}`;
const toolsModule = new URL("./vault-tools.ts", import.meta.url).pathname;

let server: RecordedServer;
let trellis: EmbeddedTrellis;

beforeAll(async () => {
  ({ server, trellis } = await startEmbeddedHarness({
    openaiKey: "sk-test-vaults",
    toolsModule,
  }));
}, 60_000);

afterAll(async () => {
  await trellis?.close();
  await server?.close();
});

const definition: JsonObject = {
  provider: "openai",
  model: "gpt-4o-mini",
  tools: ["get_weather"],
  stream: false,
};

const createAgent = (name: string) => createHarnessAgent(trellis, name, definition);

/** Runs the recorded weather turn; the tool message it made. */
async function weatherTurn(agentId: string): Promise<Message> {
  server.enqueue(
    OPENAI_CHAT,
    fixture("openai/chat-weather-tool-call.http"),
    fixture("openai/chat-weather-final.http"),
  );
  const { task: settled, sessionId } = await settledTurn(
    trellis,
    agentId,
    "What's the weather in Paris?",
    30_000,
  );
  expect(settled.status, settled.failure?.message).toBe(TaskStatus.COMPLETED);
  const listed = await trellis.client(SessionService).listMessages({ sessionId, pageSize: 100 });
  const { messages } = listed;
  const tool = messages.map((m) => m.message as Message).find((m) => m.role === Role.TOOL);
  if (!tool) throw new Error("the turn made no tool message");
  expect(toJsonString(ListMessagesResponseSchema, listed)).not.toContain(SECRET_VALUE);
  return tool;
}

describe("vault secrets in harness tools", () => {
  let allowed: string;
  let other: string;

  beforeAll(async () => {
    allowed = await createAgent("weather-allowed");
    other = await createAgent("weather-other");
    const vaults = trellis.client(VaultService);
    await vaults.createVault({
      vaultId: "vlt_weather",
      workspaceId: "default",
      provider: "trellis",
      allowedAgentIds: [allowed],
    });
    await vaults.putSecret({
      vaultId: "vlt_weather",
      name: "WEATHER_API_KEY",
      value: SECRET_VALUE,
    });
  });

  it("gives the value to a tool of an agent the vault allows (only its keyed fingerprint is recorded)", async () => {
    const tool = await weatherTurn(allowed);
    const output = JSON.parse(textOf(tool)) as JsonObject;
    expect(output.key_sha256).toBe(createHash("sha256").update(SECRET_VALUE).digest("hex"));
    const record = tool.metadata?.[`secret:${WEATHER_SECRET}`] as JsonObject;
    expect(record).toMatchObject({ kind: "secret_value", name: WEATHER_SECRET, set: true });
    // The deployment's fingerprint (the key is in the embedded database), never a plain hash.
    const deployment = trellis.contexts.get("adapters")?.fingerprints;
    expect(record.fingerprint).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(record.fingerprint).toBe(deployment?.of(SECRET_VALUE));
    expect(record).not.toHaveProperty("sha256");
    const plain = createHash("sha256").update(JSON.stringify(SECRET_VALUE)).digest("hex");
    expect(JSON.stringify(tool.metadata)).not.toContain(plain);
  });

  it("refuses it to another agent's tool with a typed error naming the secret", async () => {
    const tool = await weatherTurn(other);
    const text = textOf(tool);
    expect(text).toContain("secret_denied");
    expect(text).toContain(WEATHER_SECRET);
    expect(text).toContain(`does not allow agent ${other}`);
    expect(text).not.toContain(SECRET_VALUE);
    expect(tool.metadata?.[`secret:${WEATHER_SECRET}`]).toMatchObject({
      set: false,
      denied: "secret_denied",
    });
  });

  it("applies an updated access policy from the next turn", async () => {
    const vaults = trellis.client(VaultService);
    await vaults.updateVault({
      vaultId: "vlt_weather",
      allowedAgentIds: [other],
      updateMask: { paths: ["allowed_agent_ids"] },
    });
    try {
      expect(textOf(await weatherTurn(allowed))).toContain("secret_denied");
      const granted = JSON.parse(textOf(await weatherTurn(other))) as JsonObject;
      expect(granted.key_sha256).toBe(createHash("sha256").update(SECRET_VALUE).digest("hex"));
    } finally {
      await vaults.updateVault({
        vaultId: "vlt_weather",
        allowedAgentIds: [allowed],
        updateMask: { paths: ["allowed_agent_ids"] },
      });
    }
  });

  it("keeps the value sealed at rest", async () => {
    const db = trellis.contexts.get("adapters")!.db;
    const rows = (
      await sql<{ sealed_value: string }>`select sealed_value from adapters.vault_secrets`.execute(
        db.kysely,
      )
    ).rows;
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.sealed_value.startsWith("enc:v1:")).toBe(true);
      expect(row.sealed_value).not.toContain(SECRET_VALUE);
      expect(Buffer.from(row.sealed_value, "latin1").toString("latin1")).not.toContain("wx-key-");
    }
  });

  it("reports a deleted secret as secret_not_found", async () => {
    await trellis
      .client(VaultService)
      .deleteSecret({ vaultId: "vlt_weather", name: "WEATHER_API_KEY" });
    const text = textOf(await weatherTurn(allowed));
    expect(text).toContain("secret_not_found");
    expect(text).toContain("vault vlt_weather has no secret WEATHER_API_KEY");
  });
});
