/**
 * How one run of a task ended, as the mailbox records it (the executor's
 * result, or what the runner concluded when the executor threw or never
 * answered). Pure data.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Message } from "@trellis/contracts/core";

/** The end of one run (a turn, or the continuation of a suspended one). */
export type RunOutcome =
  | { status: "completed"; messages: Message[] }
  | {
      status: "suspended";
      messages: Message[];
      signalLabel: string;
      metadata: JsonObject;
      kind: "input" | "auth";
      checkpoint: JsonValue;
    }
  | { status: "failed"; messages: Message[]; category: string; message: string; retryable: boolean }
  | { status: "cancelled"; messages: Message[] };
