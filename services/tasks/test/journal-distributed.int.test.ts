// The whole tasks contract suite with the turn journal on (PostgreSQL +
// JetStream; replicas share the database, so two projectors run).
import { distributedTarget } from "./support/harness.js";
import { journaled } from "./support/journaled.js";
import { describeTasksService } from "./tasks-service.contract.js";

describeTasksService("distributed, journal on", journaled(distributedTarget));
