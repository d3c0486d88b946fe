/** Adapters with chosen capabilities, for routing tests (in process and in worker processes). */
import {
  defineAdapter,
  type ExecutionAdapter,
  type ExecutionCapabilities,
  type ExecutionRequest,
  MINIMAL_CAPABILITIES,
} from "@trellis/adapter-sdk";
import { chatToMessage, textOf } from "@trellis/messages";

/** Capabilities: the minimum (streaming natively, no notes), with `over` applied. */
export function capabilities(over: Partial<ExecutionCapabilities> = {}): ExecutionCapabilities {
  return { ...MINIMAL_CAPABILITIES, streaming: "native", notes: [], ...over };
}

/** Options of {@link probeAdapter}. */
export interface ProbeOptions {
  backendId: string;
  capabilities?: Partial<ExecutionCapabilities>;
  /** Called for every execution (count runs, record requests). */
  onRun?(request: ExecutionRequest): void;
}

/**
 * A backend that answers "<backend> says: <input>", streaming it first. Its
 * input may ask for more: "sleep <ms>" waits (abortably), "suspend" suspends
 * with checkpoint {step: 1}; a resume answers with the payload.
 */
export function probeAdapter(options: ProbeOptions): ExecutionAdapter {
  return defineAdapter({
    backendId: options.backendId,
    capabilities: capabilities(options.capabilities),
    async run(request) {
      options.onRun?.(request);
      const text = textOf(request.input);
      if (request.resume) {
        const answer = `${options.backendId} resumed from ${JSON.stringify(request.resume.checkpoint)} with ${JSON.stringify(request.resume.payload)}`;
        return {
          status: "completed",
          messages: [chatToMessage({ role: "assistant", content: answer })],
        };
      }
      if (text === "suspend") {
        return {
          status: "suspended",
          messages: [],
          signalLabel: "more",
          metadata: {},
          kind: "input",
          checkpoint: { step: 1 },
          reason: "clarification",
        };
      }
      const sleep = /^sleep (\d+)$/.exec(text);
      if (sleep) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Number(sleep[1]));
          request.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            resolve();
          });
        });
        if (request.signal.aborted) return { status: "cancelled", messages: [] };
      }
      const answer = `${options.backendId} says: ${text}`;
      request.onEvent?.({ kind: "text_delta", text: answer });
      request.onEvent?.({ kind: "step_finished", iteration: 1 });
      return {
        status: "completed",
        messages: [chatToMessage({ role: "assistant", content: answer })],
      };
    },
  });
}

/**
 * A backend whose answer is the vault grants its host gives it
 * (`request.vaultSecrets`), as JSON: vault id → allowed, secrets,
 * fingerprints or reason; `{"error": …}` when reading them failed.
 */
export function secretsReaderAdapter(backendId: string): ExecutionAdapter {
  return defineAdapter({
    backendId,
    capabilities: capabilities(),
    async run(request) {
      let answer: unknown;
      try {
        const grants = (await request.vaultSecrets?.()) ?? new Map();
        answer = Object.fromEntries(
          [...grants].map(([vaultId, grant]) => [
            vaultId,
            grant.allowed
              ? {
                  allowed: true,
                  secrets: Object.fromEntries(grant.secrets),
                  fingerprints: Object.fromEntries(grant.fingerprints ?? []),
                }
              : { allowed: false, reason: grant.reason },
          ]),
        );
      } catch (error) {
        answer = { error: String(error) };
      }
      return {
        status: "completed",
        messages: [chatToMessage({ role: "assistant", content: JSON.stringify(answer) })],
      };
    },
  });
}
