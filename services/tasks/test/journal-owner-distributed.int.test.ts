// The whole tasks contract suite with the session owner in distributed mode
// (TRELLIS_TASKS_JOURNAL=owner on PostgreSQL + JetStream): sessions owned
// under leases, appends fenced by expectedPosition; suites that start two
// replicas exercise the hand-off between them.
import { distributedTarget } from "./support/harness.js";
import { journaled } from "./support/journaled.js";
import { describeTasksService } from "./tasks-service.contract.js";

describeTasksService(
  "distributed, session owner under leases",
  journaled(distributedTarget, "owner"),
);
