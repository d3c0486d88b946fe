// The chat and harness conformance suites with the tasks service's embedded
// session owner (TRELLIS_TASKS_JOURNAL=owner): the turn path in memory, one
// journal append per step, rows and outbox rows projected behind.
import { describeChatConformance } from "./chat-conformance.contract.js";
import { describeHarnessConformance } from "./harness-conformance.contract.js";
import { startChatHarness } from "./support.js";

const owner = { TRELLIS_TASKS_JOURNAL: "owner" };

describeChatConformance("embedded, session owner", () => startChatHarness(owner));
describeHarnessConformance("embedded, session owner", () => startChatHarness(owner));
