// The proposal 0056 §3 scenarios in distributed mode: tasks and chat as
// separate services (runService, each on its own port) on a real PostgreSQL
// and JetStream, chat reaching tasks over h2c through TRELLIS_TASKS_URL.
import { describeChatConformance } from "./chat-conformance.contract.js";
import { startDistributedChat } from "./support.js";

describeChatConformance("distributed", () => startDistributedChat());
