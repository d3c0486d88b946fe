/**
 * Where each service listens in distributed mode, and which service owns an
 * RPC package: `trellis.<area>.v1.*` is served by the service named `<area>`.
 */
import type { DescService } from "@bufbuild/protobuf";

/** Default distributed-mode ports (override with `PORT` per process). */
export const DEFAULT_PORTS: Readonly<Record<string, number>> = {
  gateway: 8080,
  chat: 7001,
  tasks: 7002,
  receipts: 7003,
  adapters: 7004,
  // The built-in adapter worker (`trellis serve adapter-worker`): gRPC health only.
  "adapter-worker": 7005,
};

/** The service that owns an RPC service, from its proto package. */
export function ownerOf(service: DescService): string {
  const match = /^trellis\.([a-z_]+)\.v\d+\./.exec(service.typeName);
  if (!match?.[1]) throw new Error(`no Trellis service owns ${service.typeName}`);
  return match[1];
}

/**
 * Env variable that holds the base URL of a service, e.g. `TRELLIS_TASKS_URL`
 * (`adapter-worker` → `TRELLIS_ADAPTER_WORKER_URL`).
 */
export function urlVariable(service: string): string {
  return `TRELLIS_${service.toUpperCase().replaceAll("-", "_")}_URL`;
}

/** Base URL of `service` from env, else loopback on its default port. */
export function serviceUrl(service: string, env: NodeJS.ProcessEnv): string {
  const fromEnv = env[urlVariable(service)];
  if (fromEnv) return fromEnv;
  const port = DEFAULT_PORTS[service];
  if (port === undefined)
    throw new Error(`unknown service ${service}; set ${urlVariable(service)}`);
  return `http://127.0.0.1:${port}`;
}
