import { connectNats, JetStreamEventLog } from "@trellis/eventlog";
import { postgresTarget } from "@trellis/storage/contract";
import { deleteTestStreams, testNatsUrl, uniqueSuffix } from "@trellis/testkit";
import { describePublisherContract } from "../src/journal/publisher.contract.js";

// The mesh: PostgreSQL and JetStream (the shared test servers), a fresh
// database and subject prefix (so fresh streams) per suite / test.
describePublisherContract("postgres + jetstream", {
  storage: postgresTarget,
  async openLog() {
    const prefix = `pub_${uniqueSuffix()}`;
    const connection = await connectNats({ servers: testNatsUrl, name: "publisher-contract" });
    const log = await JetStreamEventLog.open({
      connection,
      prefix,
      ownsConnection: true,
      storage: "memory",
    });
    return {
      log,
      child: { servers: testNatsUrl, prefix, storage: "memory" },
      async dispose() {
        await log.close();
        await deleteTestStreams(prefix);
      },
    };
  },
});
