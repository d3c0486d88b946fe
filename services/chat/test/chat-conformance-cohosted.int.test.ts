// The proposal 0056 §3 scenarios and the harness conformance fixtures with
// tasks and chat in one distributed process (runServices, as `trellis serve
// tasks,chat` and `trellis mesh` run them) on a real PostgreSQL and
// JetStream: chat reaches tasks in memory.
import { describeChatConformance } from "./chat-conformance.contract.js";
import { describeHarnessConformance } from "./harness-conformance.contract.js";
import { startCoHostedChat } from "./support.js";

describeChatConformance("distributed, chat in the tasks process", () => startCoHostedChat());
describeHarnessConformance("distributed, chat in the tasks process", () => startCoHostedChat());
