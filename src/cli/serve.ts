/**
 * `trellis serve <service>`: run one service as its own process (distributed
 * mode), exactly as `services/<name>/src/main.ts` does. This is the container
 * image's entry point: one image, the service chosen by the argument or by
 * `TRELLIS_SERVICE` (deploy/k8s, Dockerfile).
 *
 * The name is checked before anything is loaded; only the chosen service's
 * world is imported.
 */
import { adapterWorkerName, servableServices } from "../service-names.js";
import { parseCommand, printUsage, UsageError } from "./args.js";
import { serveUsage } from "./usage.js";

export { servableServices };

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
 * Run `name` (else `TRELLIS_SERVICE`) until it is stopped: one service, or
 * several joined by commas in one process (`tasks,chat`). Resolves with an
 * exit code only when the name is missing or unknown; a running service exits
 * through its own signal handling, a failed start with one clear line.
 */
export async function runServe(
  source: NodeJS.ProcessEnv,
  name: string | undefined,
): Promise<number> {
  const chosen = name ?? source.TRELLIS_SERVICE;
  const known = servableServices.join(", ");
  if (chosen === undefined || chosen.trim() === "")
    throw new UsageError(
      `name a service (one of: ${known}) or set TRELLIS_SERVICE`,
      "serve",
      serveUsage,
    );
  const names = chosen.split(",").map((part) => part.trim());
  for (const part of names) {
    if (!servableServices.includes(part)) {
      throw new UsageError(
        `unknown service ${JSON.stringify(part)} (one of: ${known})`,
        "serve",
        serveUsage,
      );
    }
  }
  if (new Set(names).size !== names.length)
    throw new UsageError(`${JSON.stringify(chosen)} names a service twice`, "serve", serveUsage);
  const alone =
    names.length > 1 ? names.find((n) => n === adapterWorkerName || n === "gateway") : undefined;
  if (alone !== undefined)
    throw new UsageError(
      `${alone} runs in a process of its own, not with ${names.filter((n) => n !== alone).join(",")}`,
      "serve",
      serveUsage,
    );
  if (names[0] === adapterWorkerName) {
    const { runAdapterWorkerMain } = await import("@trellis/adapters");
    await runAdapterWorkerMain(source);
    return 0;
  }
  const [{ runServiceMain }, { allServices }] = await Promise.all([
    import("@trellis/platform"),
    import("../services.js"),
  ]);
  const definitions = names.map((n) => {
    const definition = allServices.find((s) => s.name === n);
    // service-names.ts and services.ts name the same services (a test holds them).
    if (!definition) throw new Error(`no service definition for ${JSON.stringify(n)}`);
    return definition;
  });
  await runServiceMain(definitions);
  return 0;
}
