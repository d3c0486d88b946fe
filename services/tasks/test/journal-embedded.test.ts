// The whole tasks contract suite with the turn journal on (embedded, PGlite).
import { embeddedTarget } from "./support/harness.js";
import { journaled } from "./support/journaled.js";
import { describeTasksService } from "./tasks-service.contract.js";

describeTasksService("embedded, journal on", journaled(embeddedTarget));
