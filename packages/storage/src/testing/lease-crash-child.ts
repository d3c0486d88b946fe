/**
 * Child process of the lease contract's crash test (run with
 * `node --import tsx`; configured by the JSON in TRELLIS_LEASE_CHILD, see
 * {@link LeaseChildConfig}). It acquires the streams, prints one JSON line
 * with its owner id and fences, then keeps renewing until the parent
 * SIGKILLs it.
 */
import { createDatabase, type DatabaseConfig } from "../create-database.js";
import { createLeases } from "../lease/leases.js";

/** What the parent asks the child to do. */
export interface LeaseChildConfig {
  database: DatabaseConfig;
  schema: string;
  streams: string[];
  ttlMs: number;
  renewEveryMs: number;
}

/** The line the child prints once it holds every stream. */
export interface LeaseChildLine {
  owner: string;
  fences: string[];
}

const config = JSON.parse(process.env.TRELLIS_LEASE_CHILD ?? "{}") as LeaseChildConfig;
const database = await createDatabase(config.database);
const leases = createLeases({
  database,
  schema: config.schema,
  ttlMs: config.ttlMs,
  renewEveryMs: config.renewEveryMs,
});
const fences: string[] = [];
for (const stream of config.streams) {
  const result = await leases.acquire(stream);
  if (!result.acquired) throw new Error(`child could not acquire ${stream}`);
  fences.push(String(result.fence));
}
process.stdout.write(
  `${JSON.stringify({ owner: leases.owner, fences } satisfies LeaseChildLine)}\n`,
);
// The renewal timer is unref'd; keep the process alive until killed.
setInterval(() => {}, 60_000);
