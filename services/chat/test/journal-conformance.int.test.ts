// The chat conformance suite with the tasks service's turn journal on
// (TRELLIS_TASKS_JOURNAL), distributed (PostgreSQL + JetStream).
import { describeChatConformance } from "./chat-conformance.contract.js";
import { startDistributedChat } from "./support.js";

describeChatConformance("distributed, journal on", () =>
  startDistributedChat({ TRELLIS_TASKS_JOURNAL: "true" }),
);
