/**
 * `trellis serve <service>`: run one service as its own process (distributed
 * mode), exactly as `services/<name>/src/main.ts` does. This is the container
 * image's entry point: one image, the service chosen by the argument or by
 * `TRELLIS_SERVICE` (deploy/k8s, Dockerfile).
 */
import { ADAPTER_WORKER, runAdapterWorkerMain } from "@trellis/adapters";
import { runServiceMain } from "@trellis/platform";
import { allServices } from "../services.js";
import { parseCommand, printUsage, UsageError } from "./args.js";
import { serveUsage } from "./usage.js";

/**
 * Names `trellis serve` accepts: the services in start order, then the
 * built-in adapter worker (not a service of the mesh's RPCs: it takes work
 * from NATS and serves only gRPC health).
 */
export const servableServices: readonly string[] = [
  ...allServices.map((s) => s.name),
  ADAPTER_WORKER,
];

/**
 * `trellis serve [SERVICE]`: parse the arguments, then {@link runServe}.
 */
export async function runServeCommand(
  source: NodeJS.ProcessEnv,
  args: readonly string[],
): Promise<number> {
  const parsed = parseCommand(
    { name: "serve", usage: serveUsage, options: {}, maxPositionals: 1 },
    args,
  );
  if (parsed.help) return printUsage(serveUsage);
  return runServe(source, parsed.positionals[0]);
}

/**
 * Run `name` (else `TRELLIS_SERVICE`) until it is stopped. Resolves with an
 * exit code only when the name is missing or unknown; a running service exits
 * through its own signal handling, a failed start with one clear line.
 */
export async function runServe(
  source: NodeJS.ProcessEnv,
  name: string | undefined,
): Promise<number> {
  const chosen = name ?? source.TRELLIS_SERVICE;
  if (chosen === ADAPTER_WORKER) {
    await runAdapterWorkerMain(source);
    return 0;
  }
  const definition = allServices.find((s) => s.name === chosen);
  if (!definition) {
    const known = servableServices.join(", ");
    throw new UsageError(
      chosen
        ? `unknown service ${JSON.stringify(chosen)} (one of: ${known})`
        : `name a service (one of: ${known}) or set TRELLIS_SERVICE`,
      "serve",
      serveUsage,
    );
  }
  await runServiceMain(definition);
  return 0;
}
