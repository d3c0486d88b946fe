import { embeddedTarget } from "./support/harness.js";
import { describeTasksService } from "./tasks-service.contract.js";

describeTasksService("embedded", embeddedTarget);
