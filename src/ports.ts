/**
 * Whether a TCP port can be bound, asked before a long start (PGlite, a whole
 * mesh) so that a busy port fails in milliseconds with a message naming it and
 * the variable that moves it, instead of after the start or never.
 */
import { once } from "node:events";
import { createServer } from "node:net";

/** The port is taken; `variable` is the setting that chooses another. */
export class PortInUseError extends Error {
  override readonly name = "PortInUseError";
  constructor(
    readonly host: string,
    readonly port: number,
    readonly variable: string,
    readonly owner: string,
  ) {
    super(
      `port ${port} on ${host} is already in use, so ${owner} cannot listen there; stop what runs on it, or choose another port with ${variable}=<port>`,
    );
  }
}

/** Resolves when `host:port` is free (port 0 always is); rejects with {@link PortInUseError}. */
export async function assertPortFree(
  host: string,
  port: number,
  variable: string,
  owner = "Trellis",
): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  probe.listen({ host, port, exclusive: true });
  try {
    await once(probe, "listening");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE") throw new PortInUseError(host, port, variable, owner);
    throw error;
  } finally {
    if (probe.listening) await new Promise((done) => probe.close(done));
  }
}

/** Whether `error` is a failed listen because the address is taken. */
export function isAddressInUse(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    (error as NodeJS.ErrnoException).code === "EADDRINUSE"
  );
}
