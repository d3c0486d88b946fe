/**
 * The A2A backend (`a2a`): a Trellis agent whose turns a remote A2A agent
 * runs, named by its card URL. The agent definition:
 *
 * ```json
 * { "card_url": "https://weather.example/.well-known/agent-card.json",
 *   "credential": "vault_x/weather_token" }
 * ```
 *
 * `credential` (optional) is a vault secret sent as `Authorization: Bearer`,
 * read under the vault's access policy for the agent. The official
 * `@a2a-js/sdk` client does the protocol (JSON-RPC or HTTP+JSON, whichever
 * the card offers).
 *
 * Capabilities come from the card: streaming when it declares streaming,
 * attachments when its input modes take more than text and JSON; remote
 * `input-required` pauses are opaque resumes (the next Trellis input is the
 * next A2A message on the remote task), never Trellis approval interrupts;
 * no tools mediated by Trellis; push notifications are not used (noted).
 * Negotiation is pure: it uses the card once read (cached; validating the
 * definition starts the read), and until then the backend's ceiling, noted;
 * every run reads the card (cached) and negotiates again, so a request the
 * card cannot serve is refused (`unsupported`) before anything is sent.
 *
 * Recorded: the remote call as a tool use (`agent.tool_use`, call id
 * `a2a:<remote task id>`, input naming the agent URL, task and context) and
 * its end (`tool.completed` / `tool.failed`), so the remote task id is in the
 * task's events and its receipt; the reply message carries the same in its
 * metadata (`a2a`). The remote context id is kept in the session's agent
 * state, so one Trellis session is one remote conversation.
 *
 * Cancel: the stream is abandoned and `CancelTask` sent to the remote agent;
 * the result is `cancelled`, and the tool result says whether the remote
 * agent confirmed (`canceled`) or not.
 */

import {
  type Message as A2aMessage,
  type Part as A2aPart,
  Role as A2aRole,
  type Task as A2aTask,
  type AgentCard,
  type StreamResponse,
  TaskState,
} from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  defineAdapter,
  EXECUTION_SCHEMA_VERSION,
  type ExecutionAdapter,
  type ExecutionCapabilities,
  type ExecutionNegotiation,
  type ExecutionRequest,
  type ExecutionResult,
  negotiateCapabilities,
  type VaultGrant,
} from "@trellis/adapter-sdk";
import type { Message } from "@trellis/contracts/core";
import { chatToMessage } from "@trellis/messages";
import { TrellisError } from "@trellis/runtime";
import { builtinRefusal, checkA2aTarget, guardedFetch, parseA2aUrl } from "./outbound.js";
import type { AddressRefusal } from "./pinned-fetch.js";

export const A2A_BACKEND = "a2a";

/** How long a read card is used before it is read again. */
const cardTtlMs = 60_000;
/** How long a cancel waits for the remote agent's answer. */
const cancelWaitMs = 5_000;
/** Polling interval of a non-streaming remote task. */
const pollMs = 250;

/** The most the backend can do whatever the card says (the card only lowers it). */
const ceiling: ExecutionCapabilities = {
  schemaVersion: EXECUTION_SCHEMA_VERSION,
  toolUse: "none",
  structuredToolCalls: false,
  continuationSupport: "opaque-resume",
  approvalInterrupts: "none",
  traceDepth: "minimal",
  attachments: true,
  streaming: "native",
  maxContextStrategy: "unknown",
  notes: ["a remote A2A agent; its card decides streaming and attachments"],
};

const textModes = new Set(["text", "text/plain", "application/json", "json", "data"]);

/** The capabilities a card declares. */
export function capabilitiesOfCard(card: AgentCard, cardUrl: string): ExecutionCapabilities {
  const streaming = card.capabilities?.streaming === true;
  const push = card.capabilities?.pushNotifications === true;
  const modes = card.defaultInputModes;
  return {
    ...ceiling,
    streaming: streaming ? "native" : "none",
    attachments: modes.some((m) => !textModes.has(m.toLowerCase())),
    notes: [
      `remote A2A agent ${JSON.stringify(card.name)} (${cardUrl})`,
      `input modes: ${modes.join(", ") || "none declared"}`,
      `push notifications: ${push ? "declared, not used (the backend streams or polls)" : "not declared"}`,
    ],
  };
}

/** The parsed definition of an A2A agent. */
export interface A2aDefinition {
  cardUrl: string;
  /** `<vault_id>/<secret name>`. */
  credential?: string;
}

function invalid(message: string, field: string): TrellisError {
  return new TrellisError({
    reason: "agent_definition_invalid",
    message: `agent.definition.${field}: ${message}`,
    param: `agent.definition.${field}`,
  });
}

export function parseA2aDefinition(definition: JsonObject): A2aDefinition {
  const cardUrl = definition.card_url;
  if (typeof cardUrl !== "string" || cardUrl === "")
    throw invalid("the card URL is required", "card_url");
  try {
    parseA2aUrl(cardUrl);
  } catch (error) {
    throw invalid(error instanceof Error ? error.message : String(error), "card_url");
  }
  const credential = definition.credential;
  if (
    credential !== undefined &&
    (typeof credential !== "string" || !/^[^/]+\/[A-Za-z0-9_.-]{1,128}$/.test(credential))
  ) {
    throw invalid('the credential is a vault secret "<vault_id>/<name>"', "credential");
  }
  for (const key of Object.keys(definition)) {
    if (!["card_url", "credential"].includes(key)) throw invalid("unknown field", key);
  }
  return { cardUrl, ...(typeof credential === "string" ? { credential } : {}) };
}

/** Options of {@link createA2aAdapter}. */
export interface A2aAdapterOptions {
  /** Allow loopback and private targets (`TRELLIS_A2A_ALLOW_PRIVATE=1`; tests, single hosts). */
  allowPrivate?: boolean;
  /**
   * Why an address may not be connected to (the host's outbound address
   * policy, injected: an adapter does not import the platform); default
   * `builtinRefusal`.
   */
  addressRefusal?: AddressRefusal;
  /** The vaults an agent may read (the host's vault access), when the request brings none. */
  vaults?(workspaceId: string, agentId: string): Promise<ReadonlyMap<string, VaultGrant>>;
}

function failed(category: string, message: string, retryable = false): ExecutionResult {
  return { status: "failed", messages: [], category, message, retryable };
}

/** The texts of A2A parts. */
function textOfParts(parts: readonly A2aPart[]): string {
  return parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
}

/** A Trellis message as A2A parts (text, JSON as data, file and image references as URLs). */
function partsOf(message: Message): A2aPart[] {
  const parts: A2aPart[] = [];
  const part = (content: A2aPart["content"], mediaType: string): A2aPart => ({
    content,
    metadata: undefined,
    filename: "",
    mediaType,
  });
  for (const p of message.parts) {
    const kind = p.kind;
    if (kind.case === "text")
      parts.push(part({ $case: "text", value: kind.value.text }, "text/plain"));
    else if (kind.case === "json") {
      const value = kind.value.value ? toJson(ValueSchema, kind.value.value) : null;
      parts.push(part({ $case: "data", value }, "application/json"));
    } else if (kind.case === "fileRef") {
      parts.push(part({ $case: "url", value: kind.value.uri }, kind.value.mimeType));
    } else if (kind.case === "image" && kind.value.source.case === "url") {
      parts.push(part({ $case: "url", value: kind.value.source.value }, kind.value.mediaType));
    }
  }
  return parts;
}

/** The text of what a suspended turn is answered with (the signal's payload). */
function resumeParts(payload: JsonValue): A2aPart[] {
  const part = (text: string): A2aPart => ({
    content: { $case: "text", value: text },
    metadata: undefined,
    filename: "",
    mediaType: "text/plain",
  });
  if (typeof payload === "string") return [part(payload)];
  if (payload !== null && typeof payload === "object" && !Array.isArray(payload)) {
    if (typeof payload.answer === "string") return [part(payload.answer)];
    const message = payload.message;
    if (message !== null && typeof message === "object" && !Array.isArray(message)) {
      const parts = (message.parts ?? []) as JsonValue[];
      const texts = parts.flatMap((p) =>
        p !== null &&
        typeof p === "object" &&
        !Array.isArray(p) &&
        p.text &&
        typeof p.text === "object"
          ? [String((p.text as JsonObject).text ?? "")]
          : [],
      );
      if (texts.length > 0) return [part(texts.join(""))];
    }
    return [
      {
        content: { $case: "data", value: payload },
        metadata: undefined,
        filename: "",
        mediaType: "application/json",
      },
    ];
  }
  return [part(JSON.stringify(payload))];
}

/** Where a suspended A2A turn stands (the checkpoint). */
interface A2aCheckpoint {
  task_id: string;
  context_id: string;
}

function checkpointOf(value: JsonValue | undefined): A2aCheckpoint | undefined {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const taskId = value.task_id;
  const contextId = value.context_id;
  return typeof taskId === "string" && typeof contextId === "string"
    ? { task_id: taskId, context_id: contextId }
    : undefined;
}

const settledStates = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);

/** Create the A2A backend. */
export function createA2aAdapter(options: A2aAdapterOptions = {}): ExecutionAdapter {
  const target = {
    allowPrivate: options.allowPrivate ?? false,
    refusal: options.addressRefusal ?? builtinRefusal,
  };
  const cards = new Map<string, { card: AgentCard; at: number }>();

  async function readCard(cardUrl: string): Promise<AgentCard> {
    const cached = cards.get(cardUrl);
    if (cached && Date.now() - cached.at < cardTtlMs) return cached.card;
    const resolver = new DefaultAgentCardResolver({ fetchImpl: guardedFetch(target) });
    const card = await resolver.resolve(cardUrl, cardUrl);
    cards.set(cardUrl, { card, at: Date.now() });
    return card;
  }

  function negotiate(
    request: ExecutionRequest,
    generic: ExecutionNegotiation,
  ): ExecutionNegotiation {
    let definition: A2aDefinition;
    try {
      definition = parseA2aDefinition(request.agent.definition);
    } catch {
      return generic; // the run fails with the definition's error
    }
    const cached = cards.get(definition.cardUrl);
    if (cached) {
      return negotiateCapabilities(capabilitiesOfCard(cached.card, definition.cardUrl), request);
    }
    return {
      ...generic,
      reasons: [
        ...generic.reasons,
        {
          code: "other",
          severity: "info",
          message:
            "the agent card has not been read yet: the run checks the request against it first",
        },
      ],
    };
  }

  async function credentialOf(request: ExecutionRequest, definition: A2aDefinition) {
    if (definition.credential === undefined) return { token: undefined };
    const slash = definition.credential.indexOf("/");
    const vaultId = definition.credential.slice(0, slash);
    const name = definition.credential.slice(slash + 1);
    const grants = request.vaultSecrets
      ? await request.vaultSecrets()
      : await options.vaults?.(request.workspaceId, request.agent.id);
    const grant = grants?.get(vaultId);
    if (!grant) return { problem: `vault ${vaultId} is not available to this agent` };
    if (!grant.allowed) return { problem: `vault ${vaultId}: ${grant.reason}` };
    const token = grant.secrets.get(name);
    if (token === undefined) return { problem: `vault ${vaultId} has no secret ${name}` };
    return { token };
  }

  async function run(request: ExecutionRequest): Promise<ExecutionResult> {
    const definition = parseA2aDefinition(request.agent.definition);
    let card: AgentCard;
    try {
      await checkA2aTarget(parseA2aUrl(definition.cardUrl), target);
      card = await readCard(definition.cardUrl);
    } catch (error) {
      if (error instanceof TrellisError && error.reason === "permission_denied") {
        return failed("permission_denied", error.message);
      }
      return failed(
        "backend_unavailable",
        `the agent card at ${definition.cardUrl} could not be read: ${error instanceof Error ? error.message : String(error)}`,
        true,
      );
    }
    const capabilities = capabilitiesOfCard(card, definition.cardUrl);
    const negotiation = negotiateCapabilities(capabilities, request);
    if (!negotiation.supported) {
      const blocking = negotiation.reasons.filter((r) => r.severity === "blocking");
      return {
        status: "failed",
        messages: [],
        category: "unsupported",
        message: `the A2A agent's card cannot serve this request: ${blocking.map((r) => `${r.code} (${r.message})`).join("; ")}`,
        retryable: false,
        reasons: negotiation.reasons,
      };
    }
    const degradation = negotiation.reasons.filter((r) => r.severity === "warning");
    const credential = await credentialOf(request, definition);
    if ("problem" in credential) {
      return failed("secret_denied", `the A2A agent's credential: ${credential.problem}`);
    }
    const fetchImpl = guardedFetch({
      ...target,
      ...(credential.token !== undefined ? { token: credential.token } : {}),
    });
    const client: Client = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [
          new JsonRpcTransportFactory({ fetchImpl }),
          new RestTransportFactory({ fetchImpl }),
        ],
      }),
    ).createFromAgentCard(card);
    const agentUrl = card.supportedInterfaces[0]?.url ?? definition.cardUrl;
    const state = request.state ?? {};
    const resume = request.resume ? checkpointOf(request.resume.checkpoint) : undefined;
    const savedContext = typeof state.a2a_context_id === "string" ? state.a2a_context_id : "";
    const message: A2aMessage = {
      messageId: `${request.taskId}:${resume ? "resume" : "input"}:${Date.now()}`,
      contextId: resume?.context_id ?? savedContext,
      taskId: resume?.task_id ?? "",
      role: A2aRole.ROLE_USER,
      parts: resume ? resumeParts(request.resume?.payload ?? null) : partsOf(request.input),
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
    if (message.parts.length === 0) {
      return failed(
        "invalid_input",
        "the input has no part the A2A agent can take (text, data, file URL)",
      );
    }

    // What the remote agent has said so far.
    let remoteTaskId = resume?.task_id ?? "";
    let contextId = message.contextId;
    let stateNow = TaskState.TASK_STATE_SUBMITTED as TaskState;
    let statusText = "";
    const artifacts = new Map<string, string>();
    let reported = false;
    const report = () => {
      if (reported || remoteTaskId === "") return;
      reported = true;
      request.onEvent?.({
        kind: "tool_started",
        toolCallId: `a2a:${remoteTaskId}`,
        name: "a2a.send_message",
        input: { agent_url: agentUrl, task_id: remoteTaskId, context_id: contextId },
      });
    };
    const takeTask = (task: A2aTask) => {
      remoteTaskId = task.id;
      contextId = task.contextId;
      stateNow = task.status?.state ?? stateNow;
      statusText = task.status?.message ? textOfParts(task.status.message.parts) : statusText;
      for (const artifact of task.artifacts)
        artifacts.set(artifact.artifactId, textOfParts(artifact.parts));
      report();
    };
    const take = (event: StreamResponse) => {
      const payload = event.payload;
      if (payload === undefined) return;
      switch (payload.$case) {
        case "task": {
          // On a resume the stream opens with the task as it waited: that
          // pause is the one being answered, not a new one.
          const waited = payload.value.status?.state;
          const before = stateNow;
          takeTask(payload.value);
          if (
            resume &&
            (waited === TaskState.TASK_STATE_INPUT_REQUIRED ||
              waited === TaskState.TASK_STATE_AUTH_REQUIRED)
          ) {
            stateNow = before;
          }
          return;
        }
        case "message":
          contextId = payload.value.contextId || contextId;
          statusText = textOfParts(payload.value.parts);
          stateNow = TaskState.TASK_STATE_COMPLETED;
          return;
        case "statusUpdate":
          remoteTaskId = payload.value.taskId || remoteTaskId;
          contextId = payload.value.contextId || contextId;
          report();
          stateNow = payload.value.status?.state ?? stateNow;
          if (payload.value.status?.message)
            statusText = textOfParts(payload.value.status.message.parts);
          return;
        case "artifactUpdate": {
          remoteTaskId = payload.value.taskId || remoteTaskId;
          report();
          const artifact = payload.value.artifact;
          if (!artifact) return;
          const text = textOfParts(artifact.parts);
          const before = payload.value.append ? (artifacts.get(artifact.artifactId) ?? "") : "";
          artifacts.set(artifact.artifactId, before + text);
          if (text !== "") request.onEvent?.({ kind: "text_delta", text });
          return;
        }
      }
    };

    // Cancel: tell the remote agent first (its stream then ends with the
    // canceled state), and stop reading when it answered or gave up.
    const abort = new AbortController();
    const sendCancel = async (): Promise<boolean> => {
      if (remoteTaskId === "") return false;
      try {
        const canceled = await client.cancelTask(
          {
            tenant: card.supportedInterfaces[0]?.tenant ?? "",
            id: remoteTaskId,
            metadata: undefined,
          },
          { signal: AbortSignal.timeout(cancelWaitMs) },
        );
        return canceled.status?.state === TaskState.TASK_STATE_CANCELED;
      } catch {
        return false;
      }
    };
    let cancelation: Promise<boolean> | undefined;
    const onAbort = () => {
      cancelation = sendCancel();
      void cancelation.finally(() => abort.abort());
    };
    if (request.signal.aborted) onAbort();
    else request.signal.addEventListener("abort", onAbort, { once: true });
    const streaming =
      capabilities.streaming === "native" && negotiation.effectiveCapabilities.streaming !== "none";
    try {
      const params = {
        tenant: card.supportedInterfaces[0]?.tenant ?? "",
        message,
        configuration: {
          acceptedOutputModes: ["text/plain", "application/json"],
          taskPushNotificationConfig: undefined,
          returnImmediately: false,
        },
        metadata: undefined,
      };
      if (streaming) {
        for await (const event of client.sendMessageStream(params, { signal: abort.signal })) {
          take(event);
          if (settledStates.has(stateNow)) break;
        }
      } else {
        const answer = await client.sendMessage(params, { signal: abort.signal });
        if ("status" in answer) takeTask(answer);
        else take({ payload: { $case: "message", value: answer } });
        while (!settledStates.has(stateNow) && remoteTaskId !== "") {
          await new Promise((resolve) => setTimeout(resolve, pollMs));
          if (abort.signal.aborted) break;
          takeTask(
            await client.getTask(
              { tenant: params.tenant, id: remoteTaskId },
              { signal: abort.signal },
            ),
          );
        }
      }
    } catch (error) {
      if (!request.signal.aborted) {
        finish("error");
        return {
          ...failed(
            "backend_execution_error",
            `the A2A agent failed: ${error instanceof Error ? error.message : String(error)}`,
            true,
          ),
          ...(degradation.length ? { degradation } : {}),
        };
      }
    } finally {
      request.signal.removeEventListener("abort", onAbort);
    }

    function finish(status: "ok" | "error") {
      if (!reported) return;
      request.onEvent?.({
        kind: "tool_finished",
        toolCallId: `a2a:${remoteTaskId}`,
        name: "a2a.send_message",
        status,
      });
    }
    const newState: JsonObject = { ...state, ...(contextId ? { a2a_context_id: contextId } : {}) };
    const origin: JsonObject = {
      agent_url: agentUrl,
      task_id: remoteTaskId,
      context_id: contextId,
    };
    const reply = (text: string): Message[] => {
      if (text === "") return [];
      const made = chatToMessage({ role: "assistant", content: text });
      made.metadata = { ...(made.metadata ?? {}), a2a: { ...origin, state: TaskState[stateNow] } };
      return [made];
    };
    const replyText = [...artifacts.values()].join("") || statusText;

    if (request.signal.aborted) {
      // Canceled before the remote task was known: its id may have come since.
      const confirmed =
        (await cancelation) || stateNow === TaskState.TASK_STATE_CANCELED || (await sendCancel());
      finish(confirmed ? "ok" : "error");
      return { status: "cancelled", messages: [], state: newState };
    }
    switch (stateNow) {
      case TaskState.TASK_STATE_COMPLETED:
        finish("ok");
        return {
          status: "completed",
          messages: reply(replyText),
          state: newState,
          ...(degradation.length ? { degradation } : {}),
        };
      case TaskState.TASK_STATE_INPUT_REQUIRED:
      case TaskState.TASK_STATE_AUTH_REQUIRED: {
        const auth = stateNow === TaskState.TASK_STATE_AUTH_REQUIRED;
        return {
          status: "suspended",
          messages: reply(statusText),
          signalLabel: `a2a:${remoteTaskId}`,
          kind: auth ? "auth" : "input",
          reason: "clarification",
          metadata: {
            kind: auth ? "a2a_auth_required" : "a2a_input_required",
            question: statusText,
            ...origin,
          },
          checkpoint: { task_id: remoteTaskId, context_id: contextId },
          state: newState,
          ...(degradation.length ? { degradation } : {}),
        };
      }
      case TaskState.TASK_STATE_CANCELED:
        finish("error");
        return { status: "cancelled", messages: reply(replyText), state: newState };
      default:
        finish("error");
        return {
          ...failed(
            stateNow === TaskState.TASK_STATE_REJECTED
              ? "backend_rejected"
              : "backend_execution_error",
            `the A2A agent ended the task ${TaskState[stateNow]}${statusText ? `: ${statusText}` : ""}`,
          ),
          messages: reply(replyText),
          state: newState,
        };
    }
  }

  const adapter = defineAdapter({
    backendId: A2A_BACKEND,
    capabilities: ceiling,
    validateDefinition(definition) {
      const parsed = parseA2aDefinition(definition);
      // Start reading the card, so negotiation has it (failures show at the run).
      void checkA2aTarget(parseA2aUrl(parsed.cardUrl), target)
        .then(() => readCard(parsed.cardUrl))
        .catch(() => undefined);
    },
    negotiate,
    run,
    graceMs: cancelWaitMs + 1000,
  });
  return adapter;
}
