/**
 * Set-up the harness test files share: the recorded model server of a file
 * (`useRecordedServer`) and a harness on it (`useRecordedHarness`), one
 * that only checks definitions (`offlineHarness`), the agent of the recorded `ask_user` conversations, a tasks service running
 * the harness against it (`startHarnessTasks`, distributed mode: real
 * PostgreSQL and JetStream), and readers of a turn's result.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { type Message, Role } from "@trellis/contracts/core";
import { createMeshClientInterceptor, runService } from "@trellis/platform";
import { createTasksService } from "@trellis/tasks";
import { openDeployment } from "@trellis/testkit/deployment";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import {
  createHarnessAdapter,
  createLocalExecutor,
  createScriptedAdapter,
  type ExecutionAdapter,
  type ExecutionResult,
  type HarnessTool,
  isProviderError,
  type ProviderError,
} from "../../../src/index.js";
import { createTools, recordedProviders } from "../../../src/testing/harness-agents.js";
import { type RecordedServer, startRecordedServer } from "../../../src/testing/recorded-server.js";

/**
 * The file's recorded model server: started before its tests, closed after.
 * With `drained`, every test must use all it queued, and the requests seen
 * are cleared between tests.
 */
export function useRecordedServer(options: { drained?: boolean } = {}): RecordedServer {
  let current: RecordedServer | undefined;
  const started = (): RecordedServer => {
    if (current === undefined) throw new Error("the recorded server starts in beforeAll");
    return current;
  };
  beforeAll(async () => {
    current = await startRecordedServer();
  });
  afterAll(async () => {
    await current?.close();
  });
  if (options.drained) {
    afterEach(() => {
      expect(started().pending()).toEqual({});
      started().requests.length = 0;
    });
  }
  return {
    get url() {
      return started().url;
    },
    get requests() {
      return started().requests;
    },
    enqueue: (path, ...responses) => started().enqueue(path, ...responses),
    pending: () => started().pending(),
    close: () => started().close(),
  };
}

/**
 * The file's recorded model server (`drained`: see {@link useRecordedServer})
 * and `harness()`, a harness adapter calling it with the test tools
 * (`createTools`), new on each call with the tools' run counts.
 */
export function useRecordedHarness(): {
  server: RecordedServer;
  harness(options?: { emailDelayMs?: number }): {
    adapter: ExecutionAdapter;
    runs: ReturnType<typeof createTools>["runs"];
  };
} {
  const server = useRecordedServer({ drained: true });
  return {
    server,
    harness(options = {}) {
      const { tools, runs } = createTools(options);
      const adapter = createHarnessAdapter({ providers: recordedProviders(server.url), tools });
      return { adapter, runs };
    },
  };
}

/**
 * A harness that only checks agent definitions: its providers point at a
 * closed port. Its tools: `tools`, or the test tools (`createTools`).
 */
export function offlineHarness(
  tools: HarnessTool[] = createTools().tools,
): ReturnType<typeof createHarnessAdapter> {
  return createHarnessAdapter({ providers: recordedProviders("http://127.0.0.1:9"), tools });
}

/**
 * The agent of the recorded Anthropic `ask_user` conversations
 * (`anthropic/messages-ask-user-*`): no tools but the built-in question.
 */
export const askingAnthropicAgent = (extra: JsonObject = {}): JsonObject => ({
  provider: "anthropic",
  model: "claude-sonnet-5-5",
  tools: [],
  ask_user: true,
  max_output_tokens: 1024,
  stream: false,
  ...extra,
});

/** A tasks service whose executor runs the scripted adapter and the harness. */
export interface HarnessTasks {
  /** The recorded model server the harness calls. */
  server: RecordedServer;
  /** Signed as a peer of the deployment (internal services take only mesh-signed calls). */
  transport: Transport;
  close(): Promise<void>;
}

/**
 * Start a recorded server, a test database and a tasks service (distributed
 * mode) running `tools` on the harness; `name` names the database and the
 * stream prefix.
 */
export async function startHarnessTasks(
  name: string,
  tools: readonly HarnessTool[],
): Promise<HarnessTasks> {
  process.env.TRELLIS_LOG_LEVEL ??= "error";
  const server = await startRecordedServer();
  const deployment = await openDeployment(name, runService, {
    env: { TRELLIS_SHUTDOWN_GRACE: "1s" },
  });
  const executor = createLocalExecutor([
    createScriptedAdapter(),
    createHarnessAdapter({ providers: recordedProviders(server.url), tools: [...tools] }),
  ]);
  const service = await deployment.start(createTasksService({ executor }));
  const transport = createGrpcTransport({
    baseUrl: service.address.url,
    interceptors: [createMeshClientInterceptor(service.mesh, "adapters")],
  });
  return {
    server,
    transport,
    async close() {
      await deployment.close();
      await server.close();
    },
  };
}

/** The {@link ProviderError} `promise` rejects with; fails on anything else. */
export async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isProviderError(error)) throw new Error(`expected a ProviderError, got ${String(error)}`);
  return error;
}

/** What `adapter` throws when it validates `definition`; undefined when it accepts it. */
export function definitionRefusal(adapter: ExecutionAdapter, definition: JsonObject): unknown {
  try {
    adapter.validateDefinition?.(definition);
  } catch (error) {
    return error;
  }
  return undefined;
}

/** Messages as role, text, tool calls and the call they answer. */
export function shape(messages: readonly Message[]) {
  return messages.map((m) => ({
    role: Role[m.role],
    text: m.parts.flatMap((p) => (p.kind.case === "text" ? [p.kind.value.text] : [])).join(""),
    toolCalls: m.toolCalls.map((c) => c.name),
    toolCallId: m.toolCallId,
  }));
}

/** A metadata record of a message (throws when there is none). */
export function record(message: Message | undefined, key: string): JsonObject {
  const value = message?.metadata?.[key];
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`no metadata ${key} on the message`);
  }
  return value as JsonObject;
}

/** The result, which must be completed. */
export function completed(result: ExecutionResult) {
  if (result.status !== "completed") {
    throw new Error(`expected completed, got ${JSON.stringify(result)}`);
  }
  return result;
}

/** The result, which must be suspended. */
export function suspended(result: ExecutionResult) {
  if (result.status !== "suspended") {
    throw new Error(`expected suspended, got ${JSON.stringify(result)}`);
  }
  return result;
}
