/**
 * The command adapter: bring your own harness in any language. It runs an
 * executable per execution that speaks JSON lines (README "Command adapter
 * line protocol"): one ExecutionRequest on stdin, ExecutionEvents on stdout,
 * the last one `turnFinished`. Cancel and timeout are SIGTERM, then SIGKILL.
 *
 * Its capabilities are declared honestly and degraded: the line protocol
 * has no native approval interrupt (a program asking for approval in text is
 * not one, BYOH §1.4) and a suspended program resumes from an opaque
 * checkpoint only. The operator chooses the executable when starting the
 * worker; an agent definition never names a command.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fromJsonString, toJsonString } from "@bufbuild/protobuf";
import {
  defineAdapter,
  EXECUTION_SCHEMA_VERSION,
  type ExecutionAdapter,
  type ExecutionCapabilities,
  type ExecutionRequest,
  type ExecutionResult,
  eventFromProto,
  requestToProto,
} from "@trellis/adapter-sdk";
import { ExecutionEventSchema, ExecutionRequestSchema } from "@trellis/contracts/adapters";
import { Role } from "@trellis/contracts/core";
import { chatToMessage } from "@trellis/messages";

/** Options of {@link createCommandAdapter}. */
export interface CommandAdapterOptions {
  backendId: string;
  /** The executable and its arguments (no shell). */
  command: readonly string[];
  cwd?: string;
  /** Extra environment for the program (added to this process's). */
  env?: Readonly<Record<string, string>>;
  /** What the program can do beyond the protocol's floor (continuation and approvals are fixed). */
  capabilities?: Partial<
    Pick<
      ExecutionCapabilities,
      "toolUse" | "traceDepth" | "attachments" | "streaming" | "maxContextStrategy"
    >
  >;
  /** Wait between SIGTERM and SIGKILL (default 1000 ms). */
  killGraceMs?: number;
}

/** Keep the tail of the program's stderr for error messages. */
const STDERR_TAIL = 2000;

function failed(category: string, message: string, retryable = false): ExecutionResult {
  return { status: "failed", messages: [], category, message, retryable };
}

/** Create a command adapter for one executable. */
export function createCommandAdapter(options: CommandAdapterOptions): ExecutionAdapter {
  const [program, ...args] = options.command;
  if (!program) throw new Error("the command adapter needs a command");
  const killGraceMs = options.killGraceMs ?? 1000;
  const capabilities: ExecutionCapabilities = {
    schemaVersion: EXECUTION_SCHEMA_VERSION,
    toolUse: options.capabilities?.toolUse ?? "none",
    structuredToolCalls: false,
    continuationSupport: "opaque-resume",
    approvalInterrupts: "none",
    traceDepth: options.capabilities?.traceDepth ?? "minimal",
    attachments: options.capabilities?.attachments ?? false,
    streaming: options.capabilities?.streaming ?? "native",
    maxContextStrategy: options.capabilities?.maxContextStrategy ?? "unknown",
    notes: [
      `runs ${program} per execution over JSON lines`,
      "no native approval interrupts; a suspended program resumes from an opaque checkpoint",
    ],
  };

  const run = (request: ExecutionRequest): Promise<ExecutionResult> =>
    new Promise<ExecutionResult>((resolve) => {
      const child = spawn(program, args, {
        cwd: options.cwd,
        env: { ...process.env, ...options.env },
        stdio: ["pipe", "pipe", "pipe"],
      });
      let outcome: ExecutionResult | undefined;
      let stderr = "";
      let text = "";
      let killTimer: NodeJS.Timeout | undefined;
      const stop = () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        child.kill("SIGTERM");
        killTimer ??= setTimeout(() => child.kill("SIGKILL"), killGraceMs);
      };
      const settle = (result: ExecutionResult) => {
        outcome ??= result;
        stop();
      };
      request.signal.addEventListener("abort", stop, { once: true });
      child.stderr.on("data", (chunk: Buffer) => {
        stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL);
      });
      child.on("error", (error) =>
        settle(failed("backend_execution_error", `cannot run ${program}: ${error.message}`)),
      );
      child.stdin.on("error", () => undefined); // a program that exits early closes it
      child.stdin.end(`${toJsonString(ExecutionRequestSchema, requestToProto(request))}\n`);
      const lines = createInterface({ input: child.stdout });
      lines.on("line", (line) => {
        if (outcome || line.trim() === "") return;
        try {
          const event = eventFromProto(fromJsonString(ExecutionEventSchema, line), "stdout");
          if (event.kind === "turn_finished") settle(event.result);
          else if (event.kind !== "routed") {
            if (event.kind === "text_delta") text += event.text;
            request.onEvent?.(event);
          }
        } catch (error) {
          settle(
            failed(
              "invalid_backend_output",
              `${program} wrote a line that is not an ExecutionEvent: ${error instanceof Error ? error.message : String(error)}`,
            ),
          );
        }
      });
      child.on("close", (code, signal) => {
        clearTimeout(killTimer);
        request.signal.removeEventListener("abort", stop);
        if (request.signal.aborted && (!outcome || outcome.status === "failed")) {
          resolve({ status: "cancelled", messages: [] });
        } else if (outcome) {
          resolve(finalize(outcome, text));
        } else {
          resolve(
            failed(
              "backend_execution_error",
              `${program} exited (${signal ?? `code ${code}`}) without a result${stderr ? `: ${stderr.trim()}` : ""}`,
            ),
          );
        }
      });
    });

  return defineAdapter({ backendId: options.backendId, capabilities, run });
}

/** Keep results within what the adapter declared; fill the answer from streamed text. */
function finalize(result: ExecutionResult, text: string): ExecutionResult {
  if (result.status === "completed" && result.messages.length === 0 && text !== "") {
    // The streamed text is the answer when the program sent no message.
    return { ...result, messages: [chatToMessage({ role: "assistant", content: text })] };
  }
  if (result.status === "suspended") {
    // No native approval interrupts: a suspension is an opaque pause, nothing more.
    const { approvalRequest: _dropped, ...rest } = result;
    return { ...rest, reason: result.reason === "deferred" ? "deferred" : "clarification" };
  }
  if (result.status === "completed" && result.messages.some((m) => m.role === Role.USER)) {
    return failed("invalid_backend_output", "a backend answer may not contain user messages");
  }
  return result;
}
