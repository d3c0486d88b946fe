// Replay and fork in distributed owner mode (TRELLIS_TASKS_JOURNAL=owner:
// sessions owned under leases): real PostgreSQL and JetStream, the
// service called as its mesh peers call it (signed service credentials).
import { describeReplay } from "./replay.contract.js";
import { distributedReplayHost } from "./support/distributed-replay-host.js";

describeReplay(
  "distributed, session owner under leases",
  distributedReplayHost({ TRELLIS_TASKS_JOURNAL: "owner" }),
);
