import { InProcessEventLog } from "@trellis/eventlog";
import { pgliteTarget } from "@trellis/storage/contract";
import { describePublisherContract } from "../src/journal/publisher.contract.js";

// Embedded mode: PGlite and the in-process log, which takes journal positions.
describePublisherContract("pglite + in-process log", {
  storage: pgliteTarget,
  async openLog() {
    const log = new InProcessEventLog();
    return { log, positioned: log, dispose: () => log.close() };
  },
});
