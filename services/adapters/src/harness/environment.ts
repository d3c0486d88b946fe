/**
 * The clock and secrets a harness tool reads through its context
 * (`ToolContext.now` / `ToolContext.secret`), and their records for replay.
 *
 * Each read is recorded on the call's tool message: a time reading as
 * `time:<label>` → `{kind: "time", label, value, tool_call_id}`, a secret as
 * `secret:<name>` → `{kind: "secret_value", name, set, sha256, tool_call_id}`
 * — its hash, never its value. A replay gives the same readings again, or its
 * `time:` / `secret:` overrides (the tasks service's replay executor supplies
 * its own {@link HarnessEnvironment}).
 */
import { createHash } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";

/** Which tool call a clock or secret read belongs to. */
export interface EnvironmentCall {
  taskId: string;
  toolCallId: string;
}

/** Where tools read the time and secrets (see the module comment). */
export interface HarnessEnvironment {
  /** The time of a labelled reading (default: the wall clock). */
  now?(label: string, call: EnvironmentCall): Date;
  /** A secret's value, undefined when there is none (default: no secrets). */
  secret?(name: string, call: EnvironmentCall): string | undefined;
}

/** Labels of clock readings and names of secrets. */
const READ_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * `sha256:<hex>` of a text's RFC 8785 form (for a string that is its JSON
 * string literal, which `JSON.stringify` writes), as every Trellis hash of
 * recorded material is made.
 */
export function textSha256(text: string): string {
  return `sha256:${createHash("sha256").update(JSON.stringify(text), "utf8").digest("hex")}`;
}

/** The reads of one tool call, recorded as they happen. */
export class CallReads {
  /** `time:<label>` / `secret:<name>` records, for the call's tool message metadata. */
  readonly records: JsonObject = {};

  constructor(
    private readonly environment: HarnessEnvironment,
    private readonly call: EnvironmentCall,
  ) {}

  /** `ToolContext.now`: one reading per label and call. */
  now(label: string): string {
    if (!READ_NAME.test(label)) {
      throw new Error(`clock reading label ${JSON.stringify(label)} must match ${READ_NAME}`);
    }
    const key = `time:${label}`;
    const known = this.records[key];
    if (typeof known === "object" && known !== null && !Array.isArray(known)) {
      if (typeof known.value === "string") return known.value;
    }
    const value = (this.environment.now?.(label, this.call) ?? new Date()).toISOString();
    this.records[key] = { kind: "time", label, value, tool_call_id: this.call.toolCallId };
    return value;
  }

  /** `ToolContext.secret`: the value for the tool, only its hash in the record. */
  secret(name: string): string | undefined {
    if (!READ_NAME.test(name)) {
      throw new Error(`secret name ${JSON.stringify(name)} must match ${READ_NAME}`);
    }
    const value = this.environment.secret?.(name, this.call);
    this.records[`secret:${name}`] = {
      kind: "secret_value",
      name,
      set: value !== undefined,
      sha256: value === undefined ? null : textSha256(value),
      tool_call_id: this.call.toolCallId,
    };
    return value;
  }
}
