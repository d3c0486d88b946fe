// Fault suite (issue 9): restart nats-server, then PostgreSQL, under the same
// load of chat turns and tasks as the kill -9 suite, with the same checks —
// clients see retryable errors only, and nothing is lost, duplicated or out of
// order afterwards. Both servers are throwaway ones started here (never the
// shared ones); the Postgres one needs initdb / pg_ctl and is skipped with a
// message when they are absent. Size: TRELLIS_FAULT_SIZE (./support.ts).
import { deleteTestStreams, ThrowawayNats, uniqueName } from "@trellis/testkit";
import { afterAll, beforeAll, describe, it } from "vitest";
import type { Mesh } from "../../src/mesh.js";
import {
  type Clients,
  createEchoAgent,
  faultUnderLoad,
  startFaultMesh,
  summary,
} from "./support.js";
import { ThrowawayPostgres, throwawayPostgresMissing } from "./throwaway-postgres.js";

const missing = throwawayPostgresMissing();
if (missing) console.warn(`[faults] restart-infra skipped: ${missing}`);

describe.skipIf(missing !== undefined)("restarting NATS and PostgreSQL under load", () => {
  let nats: ThrowawayNats;
  let postgres: ThrowawayPostgres;
  let mesh: Mesh;
  let clients: Clients;
  let agentId: string;
  const prefix = uniqueName("finfra");

  beforeAll(async () => {
    [nats, postgres] = await Promise.all([ThrowawayNats.start(), ThrowawayPostgres.start()]);
    ({ mesh, clients } = await startFaultMesh({
      databaseUrl: postgres.url,
      natsUrl: nats.url,
      natsPrefix: prefix,
    }));
    agentId = await createEchoAgent(clients, 300);
  }, 120_000);

  afterAll(async () => {
    await mesh?.stop();
    await deleteTestStreams(prefix, nats?.url).catch(() => {});
    await nats?.dispose();
    await postgres?.dispose();
  });

  const underLoad = async (name: string, fault: () => Promise<void>) => {
    const started = Date.now();
    const { verified, record } = await faultUnderLoad(
      clients,
      agentId,
      `${name}_${uniqueName("r")}`,
      fault,
    );
    console.log(summary(name, Date.now() - started, verified, record));
  };

  it("loses and duplicates nothing when nats-server restarts", async () => {
    await underLoad("restart nats-server", async () => {
      await nats.stop();
      await new Promise((r) => setTimeout(r, 1000));
      await nats.start();
    });
  }, 180_000);

  it("loses and duplicates nothing when PostgreSQL restarts", async () => {
    await underLoad("restart postgres", async () => {
      await postgres.stop("fast");
      await new Promise((r) => setTimeout(r, 1000));
      await postgres.start();
    });
  }, 180_000);
});
