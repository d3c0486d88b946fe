/**
 * The replay executor: an {@link AgentExecutor} decorator that runs replay
 * tasks from their source's recording instead of calling providers or tools
 * again (Harn replay contract, "Modes").
 *
 * A task reaches it marked by the turn runner (`metadata.trellis_replay`,
 * set for tasks with a parent); the executor loads the replay's plan and
 * runs it by its strategy (`domain/replay.ts`):
 *
 * - `rerun` (scripted): the deterministic backend runs again, through the
 *   wrapped executor;
 * - `model` (the built-in harness): its tool loop runs again in this process,
 *   with a model provider that answers from the `llm:<call_id>` records (or
 *   the `llm:` overrides) and tools that answer from the `tool:<id>` records
 *   (or the `tool:` overrides) — the real provider is never called, and a
 *   real tool only when it is `deterministic` and a `time:<label>` /
 *   `secret:<name>` override replaces a read its source call made: it then
 *   runs again with the override (other clock reads from the recording; a
 *   secret only from an override, since only its fingerprint — or, before
 *   fingerprints, its hash — was recorded);
 * - `recorded` (any other backend): the recorded output is served as it was.
 *
 * A suspension the source was resumed from is resumed at once with the
 * payload the source got (its recorded signal), so the replay's transcript
 * matches the source's. Anything the recording lacks ends the replay FAILED
 * (`replay_dependency_unavailable`), naming the first missing record — never
 * a hang, never a live call. Every message it produces carries the replay
 * marker in `metadata.replay`; one produced by an override also the override's
 * before / after hashes (the receipt delta) — for a `secret:` override its
 * before / after keyed fingerprints instead, never a plain hash of the value.
 *
 * Tasks that are no replay pass straight through.
 */
import { clone, equals, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";
import {
  type AgentExecutor,
  createHarnessAdapter,
  type ExecutionAdapter,
  type ExecutionRequest,
  type ExecutionResult,
  type HarnessTool,
  MEMORY_READ,
  MEMORY_READ_TOOL,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  routingFromDefinition,
  type ToolContext,
  unwrapCheckpoint,
} from "@trellis/execution";
import {
  isJsonObject,
  isSecretFingerprint,
  type SecretFingerprint,
  type SecretFingerprints,
} from "@trellis/runtime";
import {
  markerFor,
  openSecretOverride,
  type PlannedMessage,
  REPLAY_KEY,
  REPLAY_REQUEST_KEY,
  REPLAY_UNAVAILABLE,
  type ReplayMarker,
  type StoredOverride,
  sha256Of,
} from "../domain/replay.js";
import type { ReplayRecord } from "../store/task-store.js";
import { overrideResponse, recordedResponse } from "./recorded-model.js";

/** Options of {@link createReplayExecutor}. */
export interface ReplayExecutorOptions {
  /** A task's replay plan and material; undefined when the task is no replay. */
  load(taskId: string): Promise<ReplayRecord | undefined>;
  /**
   * The harness's tools, for their schemas and approval flags (their `run`
   * is never called by a replay). Tools not listed replay with a schema that
   * accepts any object.
   */
  harnessTools?: readonly HarnessTool[];
  /**
   * The deployment's secret fingerprints: a re-run tool's secret reads are
   * recorded with them, as the harness records them in a live run.
   */
  fingerprints: SecretFingerprints;
}

/** Wraps `inner` so that replay tasks run from their recording. */
export function createReplayExecutor(
  inner: AgentExecutor,
  options: ReplayExecutorOptions,
): AgentExecutor {
  return {
    backends: () => inner.backends(),
    validateDefinition: (backend, definition) => inner.validateDefinition(backend, definition),
    ...(inner.preflight
      ? { preflight: (request: ExecutionRequest) => inner.preflight?.(request) }
      : {}),
    async execute(request) {
      if (request.metadata?.[REPLAY_REQUEST_KEY] !== true) return inner.execute(request);
      const { [REPLAY_REQUEST_KEY]: _flag, ...metadata } = request.metadata;
      const clean: ExecutionRequest = { ...request };
      if (Object.keys(metadata).length > 0) clean.metadata = metadata;
      else delete clean.metadata;
      const record = await options.load(request.taskId);
      if (!record) return inner.execute(clean);
      return new ReplayRun(
        record,
        clean,
        inner,
        options.harnessTools ?? [],
        options.fingerprints,
      ).run();
    },
  };
}

/** A dependency the recording lacks (or a replay that left the recorded path). */
class ReplayStop extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
  }
}

/** An override applied while producing the message recorded under `key`. */
interface Applied {
  key: string;
  override: StoredOverride;
  material: string;
  before: string | null;
  /** A `secret:` override: the source's recorded fingerprint (null: none recorded). */
  beforeFingerprint?: SecretFingerprint | null;
}

/** The message without what a replay changes by design (ids, times, metadata). */
function content(message: Message): Message {
  const copy = clone(MessageSchema, message);
  copy.id = "";
  copy.createdAt = undefined;
  copy.metadata = undefined;
  return copy;
}

/** One execution of a replay task. */
class ReplayRun {
  readonly #plan: ReplayRecord["plan"];
  /** Source output by position, and the planned entry of each. */
  readonly #source: { message: Message; planned: PlannedMessage }[];
  /** Record key → index into #source. */
  readonly #byKey = new Map<string, number>();
  /** Source messages already matched by a replayed one. */
  readonly #matched = new Set<number>();
  /** Next source index a keyless message is matched from. */
  #cursor: number;
  /** Signals not yet used for an automatic resume, in order. */
  readonly #signals: { label: string; payload: JsonValue }[];
  readonly #applied = new Map<string, Applied>();
  /** Tool calls answered with their recorded result (their recorded reads go with it). */
  readonly #served = new Set<string>();
  #stop: ReplayStop | undefined;
  /** Aborts the harness when the recording runs out (and when the task is canceled). */
  readonly #abort = new AbortController();
  #harness: ExecutionAdapter | undefined;

  constructor(
    readonly record: ReplayRecord,
    readonly request: ExecutionRequest,
    readonly inner: AgentExecutor,
    readonly harnessTools: readonly HarnessTool[],
    readonly fingerprints: SecretFingerprints,
  ) {
    this.#plan = record.plan;
    this.#source = record.sourceOutput.map((message, i) => ({
      message,
      planned: record.plan.messages[i] ?? {
        messageId: message.id,
        eventId: "",
        sequence: 0,
        keys: [],
      },
    }));
    this.#source.forEach((entry, i) => {
      for (const key of Object.keys(entry.message.metadata ?? {})) {
        if (!this.#byKey.has(key)) this.#byKey.set(key, i);
      }
    });
    this.#cursor = record.plan.checkpoint?.outputCount ?? 0;
    this.#signals = record.plan.signals.map((s) => ({ ...s }));
  }

  async run(): Promise<ExecutionResult> {
    const made: Message[] = [];
    let request = this.request;
    let result = await this.#once(request);
    // Suspensions the source was resumed from resume at once, with its payload.
    while (result.status === "suspended" && !this.#stop) {
      const label = result.signalLabel;
      const index = this.#signals.findIndex((s) => s.label === label);
      if (index < 0) break;
      const [signal] = this.#signals.splice(index, 1);
      made.push(...result.messages);
      request = {
        ...this.request,
        resume: { checkpoint: result.checkpoint, payload: signal?.payload ?? null },
      };
      result = await this.#once(request);
    }
    const messages = [...made, ...result.messages];
    for (const message of messages) this.#mark(message);
    if (this.#stop) {
      return {
        status: "failed",
        messages,
        category: REPLAY_UNAVAILABLE,
        message: `replay of task ${this.#plan.sourceTaskId} cannot proceed: ${this.#stop.message} (${this.#stop.key}); nothing was fetched again`,
        retryable: false,
      };
    }
    return { ...result, messages };
  }

  #once(request: ExecutionRequest): Promise<ExecutionResult> {
    switch (this.#plan.strategy) {
      case "rerun":
        return this.inner.execute(request);
      case "model":
        return this.#runHarness(request);
      case "recorded":
        return Promise.resolve(this.#serveRecorded(request));
    }
  }

  // ---------------------------------------------------------------- markers

  /** Adds the replay marker (and any override's delta) to a produced message. */
  #mark(message: Message): void {
    const keys = Object.keys(message.metadata ?? {});
    let index: number | undefined;
    for (const key of keys) {
      const at = this.#byKey.get(key);
      if (at !== undefined && !this.#matched.has(at)) {
        index = at;
        break;
      }
    }
    if (index === undefined) index = this.#matchByContent(message);
    if (index !== undefined) {
      this.#matched.add(index);
      this.#cursor = Math.max(this.#cursor, index + 1);
      // A result served from the recording carries the clock and secret
      // reads recorded with it (the tool did not run to read them again).
      const source = this.#source[index]?.message;
      if (message.role === Role.TOOL && this.#served.has(message.toolCallId) && source) {
        const reads = Object.entries(source.metadata ?? {}).filter(
          ([key]) => /^(time|secret):/.test(key) && !keys.includes(key),
        );
        if (reads.length > 0) {
          message.metadata = { ...(message.metadata ?? {}), ...Object.fromEntries(reads) };
        }
      }
    }
    const marker: ReplayMarker = markerFor(
      this.#plan,
      this.request.taskId,
      index === undefined ? undefined : this.#source[index]?.planned,
    );
    const applied = keys.flatMap((k) => {
      const a = this.#applied.get(k);
      return a ? [a] : [];
    });
    const [first, ...more] = applied.map((a) => ({
      override_key: a.key,
      receipt_delta_id: `${this.request.taskId}:${a.key}`,
      override: {
        kind: a.override.kind,
        material: a.material,
        before_sha256: a.before,
        ...(a.override.family === "secret"
          ? {
              // Never the value's plain hash (an override stored before
              // fingerprints has one; it is not shown).
              after_sha256: null,
              before_fingerprint: a.beforeFingerprint ?? null,
              after_fingerprint: this.#fingerprintOf(a.override),
            }
          : { after_sha256: a.override.sha256 ?? null }),
        visibility: a.override.visibility,
        reason: a.override.reason,
      },
    }));
    if (first) Object.assign(marker, first);
    // A tool call that read both an overridden clock and secret: one delta each.
    if (more.length > 0) marker.more_overrides = more;
    message.metadata = {
      ...(message.metadata ?? {}),
      [REPLAY_KEY]: marker as unknown as JsonValue,
    };
  }

  /** A `secret:` override's fingerprint (made now for one stored before fingerprints). */
  #fingerprintOf(override: StoredOverride): SecretFingerprint {
    return (
      override.fingerprint ??
      this.fingerprints.of(openSecretOverride(this.fingerprints, override.value))
    );
  }

  /** The next unmatched source message (from the cursor) with the same content. */
  #matchByContent(message: Message): number | undefined {
    const wanted = content(message);
    for (let i = this.#cursor; i < this.#source.length; i++) {
      const entry = this.#source[i];
      if (!entry || this.#matched.has(i)) continue;
      if (equals(MessageSchema, content(entry.message), wanted)) return i;
    }
    return undefined;
  }

  // ---------------------------------------------------------------- recorded

  /**
   * Serves the recorded output from where the replay stands to the end, with
   * the source's ending (or its suspension, when it never went on).
   */
  #serveRecorded(request: ExecutionRequest): ExecutionResult {
    const state = request.resume ? unwrapCheckpoint(request.resume.checkpoint).state : undefined;
    const start =
      isJsonObject(state) && typeof state.replay_recorded_offset === "number"
        ? state.replay_recorded_offset
        : (this.#plan.checkpoint?.outputCount ?? 0);
    const source = this.#plan.source;
    if (start >= this.#source.length && request.resume && source.suspension) {
      this.#stop = new ReplayStop(
        `signal:${source.suspension.label}`,
        `the source never continued after waiting for ${source.suspension.label}`,
      );
      return {
        status: "failed",
        messages: [],
        category: REPLAY_UNAVAILABLE,
        message: "",
        retryable: false,
      };
    }
    const messages = this.#source.slice(start).map((entry) => {
      const copy = clone(MessageSchema, entry.message);
      copy.id = "";
      copy.createdAt = undefined;
      return copy;
    });
    switch (source.status) {
      case "COMPLETED":
        return { status: "completed", messages };
      case "FAILED":
        return {
          status: "failed",
          messages,
          category: source.failure?.category ?? "internal_error",
          message: source.failure?.message ?? "the source task failed",
          retryable: source.failure?.retryable ?? false,
        };
      case "CANCELED":
        return { status: "cancelled", messages };
      default:
        if (source.suspension) {
          return {
            status: "suspended",
            messages,
            signalLabel: source.suspension.label,
            kind: source.suspension.kind,
            metadata: source.suspension.metadata,
            checkpoint: { replay_recorded_offset: this.#source.length },
          };
        }
        this.#stop = new ReplayStop("event:task", `the source ended as ${source.status}`);
        return {
          status: "failed",
          messages,
          category: REPLAY_UNAVAILABLE,
          message: "",
          retryable: false,
        };
    }
  }

  // ---------------------------------------------------------------- harness

  #fail(key: string, message: string): ReplayStop {
    this.#stop ??= new ReplayStop(key, message);
    this.#abort.abort(this.#stop);
    return this.#stop;
  }

  async #runHarness(request: ExecutionRequest): Promise<ExecutionResult> {
    const definition = this.#withoutMcpServers(
      routingFromDefinition(request.agent.definition).definition,
      request.agent.tools,
    );
    const providerName = typeof definition.provider === "string" ? definition.provider : "";
    const system = typeof definition.system === "string" && definition.system !== "";
    this.#harness ??= createHarnessAdapter({
      providers: { [providerName]: (model) => this.#provider(providerName, model, system) },
      tools: this.#tools(definition, request.agent.tools),
      environment: {
        now: (label, call) => this.#time(label, call.toolCallId),
        secret: (name, call) => this.#secret(name, call.toolCallId),
        fingerprint: (value) => this.fingerprints.of(value),
      },
    });
    if (request.signal.aborted) this.#abort.abort(request.signal.reason);
    else
      request.signal.addEventListener("abort", () => this.#abort.abort(request.signal.reason), {
        once: true,
      });
    // Messages made before a stop are kept; what the harness adds after it is not.
    let kept = 0;
    const result = await this.#harness.execute({
      ...request,
      agent: { ...request.agent, definition },
      signal: this.#abort.signal,
      onEvent: (event) => {
        if (event.kind === "message" && !this.#stop) kept += 1;
        request.onEvent?.(event);
      },
      ...(request.resume
        ? {
            resume: {
              checkpoint: unwrapCheckpoint(request.resume.checkpoint).state,
              payload: request.resume.payload,
            },
          }
        : {}),
    });
    if (this.#stop)
      return { ...result, messages: result.messages.slice(0, kept) } as ExecutionResult;
    return result;
  }

  /** A model provider answering from the recording (or the overrides). */
  #provider(name: string, model: string, system: boolean): ModelProvider {
    return {
      provider: name,
      model,
      complete: async (call: ModelRequest): Promise<ModelResponse> => {
        const n = this.#callNumber(call.messages, system);
        const key = `llm:main:${n}`;
        const at = this.#byKey.get(key);
        const recorded = at === undefined ? undefined : this.#source[at]?.message;
        const record = recorded?.metadata?.[key];
        const override = this.record.overrides[key];
        if (override) {
          this.#applied.set(key, {
            key,
            override,
            material: `metadata.${key}.response`,
            before:
              isJsonObject(record) && record.response !== undefined
                ? sha256Of(record.response)
                : null,
          });
          return overrideResponse(override.value, key, model);
        }
        if (!recorded || !isJsonObject(record)) {
          throw this.#fail(key, `no recorded model response for call main:${n}`);
        }
        return recordedResponse(record, recorded);
      },
    };
  }

  /**
   * The number of the model call being made: one more than the assistant
   * messages already in this turn (the harness sends the system prompt, the
   * history without system messages, the input, then the turn so far —
   * across suspensions, as its call ids count).
   */
  #callNumber(messages: readonly Message[], system: boolean): number {
    const history = this.request.history.filter((m) => m.role !== Role.SYSTEM).length;
    const start = (system ? 1 : 0) + history + 1;
    return 1 + messages.slice(start).filter((m) => m.role === Role.ASSISTANT).length;
  }

  /**
   * The definition without its MCP servers: a replay never connects one. The
   * MCP tools the source called (its `tool:` records with `mcp`) become
   * tools of the definition answered from those records like any other, and
   * their approvals come from the records too.
   */
  #withoutMcpServers(definition: JsonObject, agentTools: readonly string[]): JsonObject {
    if (definition.mcp_servers === undefined) return definition;
    const { mcp_servers: _servers, ...rest } = definition;
    const called = new Set<string>();
    for (const [key, at] of this.#byKey) {
      const record = key.startsWith("tool:") ? this.#source[at]?.message.metadata?.[key] : null;
      if (isJsonObject(record) && isJsonObject(record.mcp) && typeof record.name === "string") {
        called.add(record.name);
      }
    }
    const tools = Array.isArray(definition.tools) ? definition.tools : [...agentTools];
    const approval = Array.isArray(definition.require_approval) ? definition.require_approval : [];
    return {
      ...rest,
      tools: [...tools, ...[...called].filter((name) => !tools.includes(name))],
      require_approval: approval.filter((n) => typeof n !== "string" || !n.startsWith("mcp__")),
    };
  }

  /** The agent's tools, answering from the `tool:` records (or the overrides). */
  #tools(definition: JsonObject, agentTools: readonly string[]): HarnessTool[] {
    const names = Array.isArray(definition.tools)
      ? definition.tools.filter((n): n is string => typeof n === "string")
      : [...agentTools];
    return names.map((name) => {
      const real = this.harnessTools.find((t) => t.name === name);
      const approved = [...this.#byKey.keys()].some((key) => {
        const at = this.#byKey.get(key);
        const record = at === undefined ? undefined : this.#source[at]?.message.metadata?.[key];
        return (
          key.startsWith("tool:") &&
          isJsonObject(record) &&
          record.name === name &&
          "approval" in record
        );
      });
      return {
        name,
        description: real?.description ?? "",
        inputSchema: real?.inputSchema ?? { type: "object" },
        requiresApproval: real?.requiresApproval ?? approved,
        run: (input, context) => {
          // A tool: override replaces the whole result; otherwise a
          // deterministic tool whose reads are overridden runs again.
          const replaced = this.record.overrides[`tool:${context.toolCallId}`] !== undefined;
          if (!replaced && name === MEMORY_READ) return this.#memoryRead(input, context);
          if (!replaced && real?.deterministic && this.#readsOverridden(context.toolCallId)) {
            return real.run(input, context);
          }
          this.#served.add(context.toolCallId);
          return this.#toolResult(name, context.toolCallId);
        },
      };
    });
  }

  /**
   * A memory read: what the source read (its `agent.memory_read` event for
   * the call), never what the memory holds now — unless the request opted
   * into refreshed memory, when the read runs against the memory as it is
   * (and is recorded on the replay's own log). A read the log lacks stops
   * the replay, naming it (`memory:<tool call id>`).
   */
  async #memoryRead(input: JsonObject, context: ToolContext): Promise<JsonValue> {
    if (this.#plan.refreshMemory) {
      if (!context.memory) {
        throw this.#fail(
          `memory:${context.toolCallId}`,
          "the replay asked for refreshed memory, but its host keeps none",
        );
      }
      return MEMORY_READ_TOOL.run(input, context);
    }
    this.#served.add(context.toolCallId);
    const read = this.#plan.memoryReads?.find((r) => r.toolCallId === context.toolCallId);
    if (!read) {
      throw this.#fail(
        `memory:${context.toolCallId}`,
        `the memory read by tool call ${context.toolCallId} (scope ${String(input.scope)}) is not in the source's event log`,
      );
    }
    return { memories: read.memories };
  }

  /** The record `key` of the source's tool message for `toolCallId`, if any. */
  #readRecord(toolCallId: string, key: string): JsonObject | undefined {
    const at = this.#byKey.get(`tool:${toolCallId}`);
    const record = at === undefined ? undefined : this.#source[at]?.message.metadata?.[key];
    return isJsonObject(record) ? record : undefined;
  }

  /**
   * Whether an override replaces a clock or secret read the source's call
   * `toolCallId` made: a deterministic tool then runs again (with it)
   * instead of serving its recorded result.
   */
  #readsOverridden(toolCallId: string): boolean {
    const at = this.#byKey.get(`tool:${toolCallId}`);
    const metadata = at === undefined ? undefined : this.#source[at]?.message.metadata;
    return Object.keys(metadata ?? {}).some(
      (key) => /^(time|secret):/.test(key) && this.record.overrides[key] !== undefined,
    );
  }

  /** A clock read of a re-run tool: the override, else the source's reading for that call. */
  #time(label: string, toolCallId: string): Date {
    const key = `time:${label}`;
    const recorded = this.#readRecord(toolCallId, key);
    const override = this.record.overrides[key];
    if (override) {
      this.#applied.set(key, {
        key,
        override,
        material: `metadata.${key}.value`,
        before: recorded?.value !== undefined ? sha256Of(recorded.value) : null,
      });
      return new Date(override.value as string);
    }
    if (typeof recorded?.value !== "string") {
      throw this.#fail(key, `no recorded clock reading ${label} for tool call ${toolCallId}`);
    }
    return new Date(recorded.value);
  }

  /**
   * A secret read of a re-run tool: only an override can give it (the source
   * recorded its keyed fingerprint — or, recorded before fingerprints, its
   * hash — never its value).
   */
  #secret(name: string, toolCallId: string): string | undefined {
    const key = `secret:${name}`;
    const recorded = this.#readRecord(toolCallId, key);
    const override = this.record.overrides[key];
    if (override) {
      const fingerprint = isSecretFingerprint(recorded?.fingerprint) ? recorded.fingerprint : null;
      // A record from before fingerprints: its hash, as the source shows it.
      const legacy = !fingerprint && typeof recorded?.sha256 === "string" ? recorded.sha256 : null;
      this.#applied.set(key, {
        key,
        override,
        material: `metadata.${key}.${legacy ? "sha256" : "fingerprint"}`,
        before: legacy,
        beforeFingerprint: fingerprint,
      });
      try {
        return openSecretOverride(this.fingerprints, override.value);
      } catch {
        throw this.#fail(key, `the ${key} override cannot be opened: the deployment key changed`);
      }
    }
    if (recorded?.set === false) return undefined;
    throw this.#fail(
      key,
      `secret ${name} read by tool call ${toolCallId} was recorded as a digest only; replay it with a secret:${name} override`,
    );
  }

  #toolResult(name: string, toolCallId: string): JsonValue {
    const key = `tool:${toolCallId}`;
    const at = this.#byKey.get(key);
    const record = at === undefined ? undefined : this.#source[at]?.message.metadata?.[key];
    const override = this.record.overrides[key];
    if (override) {
      this.#applied.set(key, {
        key,
        override,
        material: `metadata.${key}.output`,
        before:
          isJsonObject(record) && record.output !== undefined ? sha256Of(record.output) : null,
      });
      return override.value;
    }
    if (!isJsonObject(record)) {
      throw this.#fail(key, `no recorded result for tool call ${toolCallId} (${name})`);
    }
    const output = typeof record.output === "string" ? record.output : "";
    if (record.status === "ok") return output;
    if (record.status === "error") {
      // The harness words a tool's error as "Error: <name> failed: <message>".
      const prefix = `Error: ${name} failed: `;
      throw new Error(output.startsWith(prefix) ? output.slice(prefix.length) : output);
    }
    throw this.#fail(
      key,
      `tool call ${toolCallId} (${name}) was ${String(record.status)} in the source run, but the replay ran it`,
    );
  }
}
