// The harness conformance fixtures through ChatService in embedded mode:
// tasks + chat in one process (PGlite in memory, the in-process log).
import { describeHarnessConformance } from "./harness-conformance.contract.js";
import { startChatHarness } from "./support.js";

describeHarnessConformance("embedded", () => startChatHarness());
