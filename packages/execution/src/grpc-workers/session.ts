/**
 * One gRPC worker's session (proto `WorkerService`): its announcement, its
 * lease (the command stream is open and heartbeats arrive) and its command
 * stream. What the session is offered and how claims, events and results are
 * judged is the business of a {@link WorkerPort}: in-memory dispatch in
 * embedded mode (`hub.ts`), the JetStream work queue in a mesh (`bridge.ts`).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  type ExecutionEvent,
  type ExecutionNegotiation,
  type ExecutionResult,
  toToken,
} from "@trellis/adapter-sdk";
import {
  type ConnectWorkerResponse,
  ConnectWorkerResponseSchema,
  type ExecutionRequest as PbRequest,
  type VaultGrantSchema,
} from "@trellis/contracts/adapters";
import { TrellisError } from "@trellis/runtime";
import type { WorkerAnnouncement } from "../routing/registry.js";

/** One attempt a worker holds or was offered. */
export interface WorkAttempt {
  executionId: string;
  attempt: number;
}

/** How a session ended. */
export type SessionEnd = "left" | "lost";

/** The dispatch side of gRPC workers (one per mode). */
export interface WorkerPort {
  /** A session is registered: announce it and start offering it work. Throws a typed error to refuse it. */
  attach(session: WorkerSession): void;
  /** The session's heartbeat arrived (its lease was renewed). */
  beat(session: WorkerSession): void;
  /** The session ended: `left` (it said so) or `lost` (stream gone or lease expired). */
  detach(session: WorkerSession, how: SessionEnd): void;
  claim(
    session: WorkerSession,
    work: WorkAttempt,
    negotiation: ExecutionNegotiation,
  ): Promise<{ granted: boolean; reason: string }>;
  /** Progress of a granted attempt; false when it is not the session's now. */
  events(session: WorkerSession, work: WorkAttempt, events: ExecutionEvent[]): boolean;
  /**
   * The result of a granted attempt, after its `trailing` progress (in
   * order; refused with the result when the attempt is not the session's);
   * false when it is not taken.
   */
  complete(
    session: WorkerSession,
    work: WorkAttempt,
    result: ExecutionResult,
    trailing?: readonly ExecutionEvent[],
  ): Promise<boolean>;
  /**
   * The vault grants of a granted, running attempt's agent (with the
   * deployment's fingerprints), as the JetStream path's SecretsRequest
   * answers them. Throws {@link secretsRefused} for anyone else.
   */
  secrets(session: WorkerSession, work: WorkAttempt): Promise<VaultGrantInit[]>;
}

/** One vault grant as GetWorkSecrets answers it. */
export type VaultGrantInit = MessageInitShape<typeof VaultGrantSchema>;

/** GetWorkSecrets for an attempt the session does not run now (or the vaults cannot be read). */
export function secretsRefused(workerId: string, why: string): TrellisError {
  return new TrellisError({
    reason: "permission_denied",
    message: `worker ${JSON.stringify(workerId)} gets no vault secrets: ${why}`,
    param: "work",
    metadata: { worker_id: workerId },
    domain: "adapters.trellis.dev",
  });
}

/** A call that names a session that is not (or no longer) live (NotFound: connect again). */
export function sessionNotFound(workerId: string): TrellisError {
  return new TrellisError({
    reason: "adapter_worker_not_found",
    message: `worker ${JSON.stringify(workerId)} has no live session (it left, or its lease expired); connect again`,
    param: "worker_id",
    metadata: { worker_id: workerId },
    domain: "adapters.trellis.dev",
  });
}

/** A connected gRPC worker. */
export class WorkerSession {
  readonly workerId: string;
  readonly token: string;
  readonly backendId: string;
  announcement: WorkerAnnouncement;
  /** When its lease was last renewed (epoch ms). */
  lastSeen: number;
  readonly ttlMs: number;
  /** Attempts offered and not yet claimed or given back, by execution id. */
  readonly offered = new Map<string, number>();
  /** Attempts granted and not yet completed, by execution id. */
  readonly running = new Map<string, number>();
  #ended: SessionEnd | undefined;
  readonly #commands: ConnectWorkerResponse[] = [];
  #wake: (() => void) | undefined;

  constructor(announcement: WorkerAnnouncement, ttlMultiplier: number, now: number) {
    const workerId =
      announcement.workerId === ""
        ? toToken(`${announcement.backendId}-${randomUUID().slice(0, 12)}`)
        : announcement.workerId;
    this.workerId = workerId;
    this.backendId = announcement.backendId;
    // Whether work reaches it directly is the port's business, not the worker's.
    const { direct: _ignored, ...announced } = announcement;
    this.announcement = { ...announced, workerId, leaving: false };
    this.token = randomBytes(18).toString("base64url");
    this.ttlMs = announcement.heartbeatMs * ttlMultiplier;
    this.lastSeen = now;
  }

  get ended(): SessionEnd | undefined {
    return this.#ended;
  }

  /** Attempts it is offered or runs now. */
  get load(): number {
    return this.offered.size + this.running.size;
  }

  /** Whether it may be offered one more attempt. */
  get free(): boolean {
    return this.#ended === undefined && this.load < this.announcement.capacity;
  }

  /** Queue a command for the stream. */
  send(command: MessageInitShape<typeof ConnectWorkerResponseSchema>["command"]): void {
    if (this.#ended) return;
    this.#commands.push(create(ConnectWorkerResponseSchema, { command }));
    this.#wake?.();
  }

  offer(work: WorkAttempt, request: PbRequest, deadline: number | undefined): void {
    this.offered.set(work.executionId, work.attempt);
    this.send({
      case: "offer",
      value: {
        executionId: work.executionId,
        attempt: work.attempt,
        request,
        ...(deadline !== undefined ? { deadline: timestampFromMs(deadline) } : {}),
      },
    });
  }

  cancel(work: WorkAttempt, reason: string): void {
    this.send({ case: "cancel", value: { ...work, reason } });
  }

  /** End the session (idempotent); the stream finishes. */
  end(how: SessionEnd): boolean {
    if (this.#ended) return false;
    this.#ended = how;
    this.#wake?.();
    return true;
  }

  /** The next queued command, if any (for a consumer other than {@link commands}). */
  nextCommand(): ConnectWorkerResponse | undefined {
    return this.#commands.shift();
  }

  /**
   * Called once when a command is queued or the session ends (the one
   * consumer of its commands sets it before it waits; a later call replaces it).
   */
  set waiter(wake: (() => void) | undefined) {
    this.#wake = wake;
  }

  /** The commands until the session ends or `signal` aborts. */
  async *commands(signal: AbortSignal): AsyncGenerator<ConnectWorkerResponse> {
    const onAbort = () => this.#wake?.();
    signal.addEventListener("abort", onAbort);
    try {
      for (;;) {
        const next = this.#commands.shift();
        if (next) {
          yield next;
          continue;
        }
        if (this.#ended || signal.aborted) return;
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
        this.#wake = undefined;
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }
}
