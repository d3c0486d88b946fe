/**
 * What exists before anyone creates anything: the `default` workspace and its
 * default agent, a scripted "echo" agent that replies with the input text.
 * Tasks and sessions that name no agent use their workspace's default agent.
 */
import type { JsonObject } from "@bufbuild/protobuf";

/** Id of the workspace every deployment has. */
export const DEFAULT_WORKSPACE_ID = "default";

/** Id of the default workspace's echo agent. */
export const DEFAULT_AGENT_ID = "agent_echo";

/** The scripted graph of an echo agent: one assistant message with the input text. */
export const ECHO_GRAPH: JsonObject = {
  entry: "reply",
  nodes: { reply: { update: { messages: [{ role: "assistant", content: "{{input}}" }] } } },
  edges: [],
};

/** Backends whose turns are deterministic, so a lost worker's turn may simply run again. */
export const DETERMINISTIC_BACKENDS: ReadonlySet<string> = new Set(["scripted"]);
