/** The shared vocabulary of scripted graph documents (`graph.ts`, `state.ts`). */

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A problem found in a graph document. */
export class GraphDefinitionError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(`${path}: ${message}`);
    this.name = "GraphDefinitionError";
  }
}

/** A chat-shaped message as written in a graph document (llm-provider §3). */
export interface GraphMessage {
  role: "system" | "user" | "assistant" | "tool";
  content?: string | Json[];
  tool_calls?: { id: string; name: string; arguments?: Json }[];
  tool_call_id?: string;
  name?: string;
}
