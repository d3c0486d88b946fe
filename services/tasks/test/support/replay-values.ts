/**
 * What the replay contract compares and builds: markers and records
 * written by the scripted agents, event payloads, task output as the store
 * keeps it, and a dice backend whose results a replay must not re-roll.
 * (Messages without their volatile fields: `comparable`, in src/testing.)
 */
import { createHash } from "node:crypto";
import { create, fromBinary, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { sizeDelimitedEncode, sizeDelimitedPeek } from "@bufbuild/protobuf/wire";
import { type Event, type Message, MessageSchema, Role, TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import type { ExecutionAdapter } from "@trellis/execution";
import { canonicalize } from "json-canonicalize";

export const terminal = (t: Task) =>
  t.status === TaskStatus.COMPLETED ||
  t.status === TaskStatus.FAILED ||
  t.status === TaskStatus.CANCELED;
export const settled = (t: Task) =>
  terminal(t) || t.status === TaskStatus.INPUT_REQUIRED || t.status === TaskStatus.AUTH_REQUIRED;

export function sha256(value: JsonValue): string {
  return `sha256:${createHash("sha256").update(canonicalize(value)).digest("hex")}`;
}

export function markerOf(message: Message | undefined): JsonObject {
  return (message?.metadata?.replay ?? {}) as JsonObject;
}

export function recordOf(message: Message | undefined, key: string): JsonObject {
  return (message?.metadata?.[key] ?? {}) as JsonObject;
}

export function textOf(message: Message | undefined): string {
  return (message?.parts ?? [])
    .flatMap((p) => (p.kind.case === "text" ? [p.kind.value.text] : []))
    .join("");
}

export function dataOf(event: Event | undefined): JsonObject {
  const payload = event?.payload?.kind;
  return payload?.case === "data" ? payload.value : {};
}

/**
 * A backend that is neither deterministic nor recorded in detail: each run
 * rolls a die. A replay must serve the recorded roll, never roll again.
 */
export function createDice(): { adapter: ExecutionAdapter; rolls: number[] } {
  const rolls: number[] = [];
  return {
    rolls,
    adapter: {
      backendId: "dice",
      async execute() {
        const roll = 1 + Math.floor(Math.random() * 1_000_000);
        rolls.push(roll);
        return {
          status: "completed",
          messages: [
            create(MessageSchema, {
              role: Role.ASSISTANT,
              parts: [{ kind: { case: "text", value: { text: `rolled ${roll}` } } }],
            }),
          ],
        };
      },
    },
  };
}

/** Registers the suite against a host. */

/** Task output as the store keeps it: size-delimited Messages. */
export function decodeOutput(data: Uint8Array): Message[] {
  const out: Message[] = [];
  let rest = data;
  while (rest.length > 0) {
    const peek = sizeDelimitedPeek(rest);
    if (peek.eof) break;
    out.push(fromBinary(MessageSchema, rest.subarray(peek.offset, peek.offset + peek.size)));
    rest = rest.subarray(peek.offset + peek.size);
  }
  return out;
}

export function encodeOutput(messages: Message[]): Uint8Array {
  return Buffer.concat(messages.map((m) => sizeDelimitedEncode(MessageSchema, m)));
}
