import { distributedTarget } from "./support/harness.js";
import { describeTasksService } from "./tasks-service.contract.js";

describeTasksService("distributed", distributedTarget);
