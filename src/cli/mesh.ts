import { createLogger, env, loadConfig, onShutdownSignals } from "@trellis/runtime";
import { startMesh } from "../mesh.js";

/** Env of `trellis mesh`. */
export const meshConfigSchema = {
  DATABASE_URL: env
    .url({ protocols: ["postgres", "postgresql"] })
    .default("postgres://postgres@127.0.0.1:5432/postgres"),
  NATS_URL: env.string().default("nats://127.0.0.1:4222"),
  TRELLIS_NATS_PREFIX: env.string().default("trellis"),
  TRELLIS_PORT: env.port().default(8080),
  /** Built-in adapter workers (the harness backend over OpenAI / Anthropic) to run beside the services. */
  TRELLIS_MESH_ADAPTER_WORKERS: env.int({ min: 0, max: 16 }).default(1),
};

/** `trellis mesh`: every service as its own process until Ctrl-C. */
export async function runMesh(source: NodeJS.ProcessEnv): Promise<number> {
  const config = loadConfig(meshConfigSchema, source);
  const logger = createLogger({ service: "mesh" });
  const mesh = await startMesh({
    databaseUrl: config.DATABASE_URL,
    natsUrl: config.NATS_URL,
    natsPrefix: config.TRELLIS_NATS_PREFIX,
    ports: { gateway: config.TRELLIS_PORT },
    adapterWorkers: config.TRELLIS_MESH_ADAPTER_WORKERS,
  });
  const rows = Object.entries(mesh.urls).map(([name, url]) => `  ${name.padEnd(9)} ${url}`);
  process.stdout.write(
    `Trellis mesh is up (logs in .trellis/mesh-logs):\n${rows.join("\n")}\nCtrl-C stops it.\n`,
  );
  await new Promise<void>((done) => {
    onShutdownSignals(
      async () => {
        await mesh.stop();
        done();
      },
      { logger, exit: false },
    );
  });
  return 0;
}
