// The proposal 0056 §3 scenarios in embedded mode: tasks + chat in one
// process (PGlite in memory, the in-process log).
import { describeChatConformance } from "./chat-conformance.contract.js";
import { startChatHarness } from "./support.js";

describeChatConformance("embedded", () => startChatHarness());
