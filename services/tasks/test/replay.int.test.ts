// Replay and fork in distributed mode: real PostgreSQL and JetStream, the
// service called as its mesh peers call it (signed service credentials).
import { describeReplay } from "./replay.contract.js";
import { distributedReplayHost } from "./support/distributed-replay-host.js";

describeReplay("distributed", distributedReplayHost());
