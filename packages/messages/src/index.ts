/** The canonical message: chat JSON mapping and shape validation. */
export {
  type ChatBlockJson,
  type ChatMessageJson,
  type ChatToolCallJson,
  chatToMessage,
  messageToChat,
  parseRole,
  roleName,
  textOf,
} from "./chat-json.js";
export { isTerminalStatus } from "./task-status.js";
export {
  type ShapeProblem,
  validateChatMessage,
  validateToolCallReference,
  validateTranscript,
} from "./validate.js";
