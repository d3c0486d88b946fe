// Memory in distributed mode (PostgreSQL, JetStream).
import { describeMemory } from "./memory.contract.js";
import { distributedTarget } from "./support/harness.js";

describeMemory(distributedTarget());
