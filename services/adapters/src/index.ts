/** @trellis/adapters: the execution seam and the backends Trellis ships. */
export { adaptersService } from "./definition.js";
export type {
  AgentExecutor,
  ExecutionAdapter,
  ExecutionAgent,
  ExecutionEvent,
  ExecutionRequest,
  ExecutionResult,
} from "./executor.js";
export { createLocalExecutor } from "./local-executor.js";
export {
  END,
  type GraphMessage,
  parseGraph,
  runGraph,
  type ScriptedGraph,
} from "./scripted/graph.js";
export { createScriptedAdapter, SCRIPTED_BACKEND } from "./scripted/scripted-adapter.js";
