// The whole tasks contract suite with the embedded session owner
// (TRELLIS_TASKS_JOURNAL=owner: submit and finish in memory, one journal
// append each, rows projected behind), on PGlite.
import { embeddedTarget } from "./support/harness.js";
import { journaled } from "./support/journaled.js";
import { describeTasksService } from "./tasks-service.contract.js";

describeTasksService("embedded, session owner", journaled(embeddedTarget, "owner"));
