import { describeEventLogContract } from "../src/event-log.contract.js";
import { inProcessTarget } from "./targets.js";

describeEventLogContract("InProcessEventLog", inProcessTarget);
