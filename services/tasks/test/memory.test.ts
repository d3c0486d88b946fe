// Memory in embedded mode (PGlite, the in-process log).
import { describeMemory } from "./memory.contract.js";
import { embeddedTarget } from "./support/harness.js";

describeMemory(embeddedTarget());
