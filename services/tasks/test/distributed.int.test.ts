// The whole tasks contract suite on the relational path (PostgreSQL +
// JetStream, TRELLIS_TASKS_JOURNAL=false, pinned since owner mode became the
// distributed default in session 15; the default, owner under leases, runs
// the same suite in journal-owner-distributed.int.test.ts).
import { distributedTarget } from "./support/harness.js";
import { journaled } from "./support/journaled.js";
import { describeTasksService } from "./tasks-service.contract.js";

describeTasksService("distributed, relational path", journaled(distributedTarget, "false"));
