// The harness conformance fixtures through ChatService in distributed mode:
// tasks and chat as separate services on PostgreSQL and JetStream.
import { describeHarnessConformance } from "./harness-conformance.contract.js";
import { startDistributedChat } from "./support.js";

describeHarnessConformance("distributed", () => startDistributedChat());
