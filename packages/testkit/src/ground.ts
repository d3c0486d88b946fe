/**
 * The ground a distributed mesh (or any set of services) is started on in a
 * suite or bench: a fresh database of the test PostgreSQL and a fresh NATS
 * prefix, and one call that removes both again.
 *
 *   const ground = testGround("fault_kill");
 *   beforeAll(async () => { mesh = await startMesh({ ...(await ground.prepare()) }); });
 *   afterAll(async () => { await mesh?.stop(); await ground.remove(); });
 */
import {
  createTestDatabase,
  deleteTestStreams,
  type TestDatabase,
  testNatsUrl,
  uniqueName,
} from "./index.js";

/** Where services are pointed: what `startMesh` and the services' configs take. */
export interface GroundTarget {
  databaseUrl: string;
  natsUrl: string;
  natsPrefix: string;
}

/** A database and NATS prefix of one suite (see the module comment). */
export interface TestGround {
  /** The NATS subject/stream prefix, unique to this ground. */
  readonly prefix: string;
  /** The test NATS server's URL. */
  readonly natsUrl: string;
  /** The database; throws before {@link TestGround.prepare} has resolved. */
  readonly db: TestDatabase;
  /** Creates the database (once; later calls return the same target). */
  prepare(): Promise<GroundTarget>;
  /**
   * Drops the database and deletes the prefix's streams (best effort: a NATS
   * server that cannot be reached keeps them); nothing to drop when never prepared.
   */
  remove(): Promise<void>;
}

/** Options of {@link testGround}. */
export interface TestGroundOptions {
  /** Start of the database's name (default `trellis_<name>`). */
  database?: string;
  /** The NATS server (default the test server). */
  natsUrl?: string;
}

/** A ground whose database and prefix are named after `name` (e.g. `"mesh"` → `trellis_mesh_…`). */
export function testGround(name: string, options: TestGroundOptions = {}): TestGround {
  const { database = `trellis_${name}`, natsUrl = testNatsUrl } = options;
  const prefix = uniqueName(name);
  let db: TestDatabase | undefined;
  let creating: Promise<TestDatabase> | undefined;
  return {
    prefix,
    natsUrl,
    get db(): TestDatabase {
      if (!db) throw new Error(`test ground ${prefix}: prepare() has not resolved yet`);
      return db;
    },
    async prepare() {
      creating ??= createTestDatabase(database);
      db = await creating;
      return { databaseUrl: db.url, natsUrl, natsPrefix: prefix };
    },
    async remove() {
      const created = creating && (await creating.catch(() => undefined));
      creating = undefined;
      db = undefined;
      await created?.drop();
      await deleteTestStreams(prefix, natsUrl).catch(() => undefined);
    },
  };
}
