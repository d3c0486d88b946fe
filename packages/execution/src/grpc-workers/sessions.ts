/**
 * The live gRPC worker sessions of one process and their leases: a session
 * lives while its command stream is open and its heartbeats arrive
 * (`ttlMultiplier` missed beats end it). Every call of a worker is fenced by
 * its worker id and session token. Leases are checked only while a session
 * is open: a service no worker connected to sets no timer.
 */
import { validateAnnouncement, type WorkerAnnouncement } from "../routing/registry.js";
import { type SessionEnd, sessionNotFound, type WorkerPort, WorkerSession } from "./session.js";

/** Options of {@link WorkerSessions}. */
export interface WorkerSessionsOptions {
  port: WorkerPort;
  /** Missed heartbeats after which a session is lost (default 3). */
  ttlMultiplier?: number;
  /** How often leases are checked (default 200 ms). */
  sweepMs?: number;
  now?: () => number;
}

/** The session table. */
export class WorkerSessions {
  readonly port: WorkerPort;
  readonly #sessions = new Map<string, WorkerSession>();
  readonly #ttlMultiplier: number;
  readonly #now: () => number;
  readonly #sweepMs: number;
  #sweep: NodeJS.Timeout | undefined;

  constructor(options: WorkerSessionsOptions) {
    this.port = options.port;
    this.#ttlMultiplier = options.ttlMultiplier ?? 3;
    this.#now = options.now ?? Date.now;
    this.#sweepMs = options.sweepMs ?? 200;
  }

  /** Check leases while there are sessions, not otherwise. */
  #arm(): void {
    if (this.#sessions.size === 0) {
      clearInterval(this.#sweep);
      this.#sweep = undefined;
    } else if (!this.#sweep) {
      this.#sweep = setInterval(() => this.sweep(), this.#sweepMs);
      this.#sweep.unref();
    }
  }

  /** Register a worker; throws a typed error (InvalidArgument naming the field) to refuse it. */
  connect(announcement: WorkerAnnouncement): WorkerSession {
    const session = new WorkerSession(announcement, this.#ttlMultiplier, this.#now());
    validateAnnouncement(session.announcement);
    // The same worker id connecting again: its older session is gone.
    const older = this.#sessions.get(session.workerId);
    if (older) this.end(older, "lost");
    this.port.attach(session);
    this.#sessions.set(session.workerId, session);
    this.#arm();
    return session;
  }

  /** The live session `workerId` / `token`, else NotFound. */
  live(workerId: string, token: string): WorkerSession {
    const session = this.#sessions.get(workerId);
    if (!session || session.token !== token || session.ended) throw sessionNotFound(workerId);
    return session;
  }

  /** Renew a session's lease. */
  beat(session: WorkerSession, inFlight: number): void {
    session.lastSeen = this.#now();
    session.announcement = { ...session.announcement, inFlight };
    this.port.beat(session);
  }

  /** End a session (idempotent). */
  end(session: WorkerSession, how: SessionEnd): void {
    if (!session.end(how)) return;
    if (this.#sessions.get(session.workerId) === session) this.#sessions.delete(session.workerId);
    this.#arm();
    this.port.detach(session, how);
  }

  /** End every session whose lease ran out. */
  sweep(): void {
    const now = this.#now();
    for (const session of [...this.#sessions.values()]) {
      if (now - session.lastSeen > session.ttlMs) this.end(session, "lost");
    }
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** End every session (the service stops). */
  close(): void {
    for (const session of [...this.#sessions.values()]) this.end(session, "lost");
    clearInterval(this.#sweep);
    this.#sweep = undefined;
  }
}
