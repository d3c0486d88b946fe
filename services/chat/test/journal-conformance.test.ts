// The chat and harness conformance suites with the tasks service's turn
// journal on (TRELLIS_TASKS_JOURNAL), embedded.
import { describeChatConformance } from "./chat-conformance.contract.js";
import { describeHarnessConformance } from "./harness-conformance.contract.js";
import { startChatHarness } from "./support.js";

const journalOn = { TRELLIS_TASKS_JOURNAL: "true" };

describeChatConformance("embedded, journal on", () => startChatHarness(journalOn));
describeHarnessConformance("embedded, journal on", () => startChatHarness(journalOn));
