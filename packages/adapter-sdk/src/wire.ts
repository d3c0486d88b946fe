/**
 * The NATS side of the worker protocol (proto/trellis/adapters/v1/worker.proto):
 * subject names, the work-queue stream and its per-backend consumers. Shared
 * by workers (this package) and the router (services/adapters), so the two
 * cannot drift apart.
 */
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { errors, nanos } from "@nats-io/transport-node";

/** Subject and stream names under one prefix (TRELLIS_NATS_PREFIX). */
export interface WireNames {
  prefix: string;
  /** The work-queue stream, `<PREFIX>_ADAPTER_WORK`. */
  stream: string;
  /** Where work for `backend` is queued. */
  work(backend: string): string;
  /** The durable consumer the workers of `backend` share. */
  consumer(backend: string): string;
  /** Heartbeats of `backend`'s workers. */
  heartbeats(backend: string): string;
  /** Every heartbeat. */
  allHeartbeats: string;
  /** Routers ask every worker to beat now. */
  discover: string;
  /** Cancel notices for one worker. */
  cancel(workerId: string): string;
  /** A router's inbox prefix (claims, events and results arrive under it). */
  routerInbox(routerId: string): string;
  /**
   * Work items placed on one worker directly (core NATS, no queue): for
   * workers that announce `direct_offers` (the adapters service's gRPC
   * worker sessions).
   */
  offer(workerId: string): string;
}

/** Subject tokens used for ids: letters, digits, `_`, `-`. */
export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Make an arbitrary string a safe subject token (for generated ids). */
export function toToken(value: string): string {
  return value.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64) || "_";
}

/** The names for `prefix` (default "trellis"). */
export function wireNames(prefix = "trellis"): WireNames {
  const stream = `${prefix.replaceAll(".", "_").toUpperCase()}_ADAPTER_WORK`;
  return {
    prefix,
    stream,
    work: (backend) => `${prefix}.adapters.work.${backend}`,
    consumer: (backend) => `work-${backend}`,
    heartbeats: (backend) => `${prefix}.adapters.workers.${backend}`,
    allHeartbeats: `${prefix}.adapters.workers.*`,
    discover: `${prefix}.adapters.discover`,
    cancel: (workerId) => `${prefix}.adapters.cancel.${workerId}`,
    routerInbox: (routerId) => `${prefix}.adapters.router.${routerId}`,
    offer: (workerId) => `${prefix}.adapters.offer.${workerId}`,
  };
}

/** Options of the work-queue stream. */
export interface WorkStreamOptions {
  /** `file` (default) or `memory`. */
  storage?: "file" | "memory";
  /** Work older than this is dropped unclaimed (default 1 h). */
  maxAgeMs?: number;
}

/**
 * Create the work-queue stream if it is missing (safe from every router and
 * worker at start). Work-queue retention: a message is gone once acked, and
 * each backend's subject has exactly one consumer.
 */
export async function ensureWorkStream(
  jsm: JetStreamManager,
  names: WireNames,
  options: WorkStreamOptions = {},
): Promise<void> {
  try {
    await jsm.streams.info(names.stream);
    return;
  } catch (error) {
    if (!(error instanceof JetStreamApiError) || error.code !== 10059) throw error;
  }
  try {
    await jsm.streams.add({
      name: names.stream,
      subjects: [`${names.prefix}.adapters.work.>`],
      retention: RetentionPolicy.Workqueue,
      storage: options.storage === "memory" ? StorageType.Memory : StorageType.File,
      discard: DiscardPolicy.Old,
      max_age: nanos(options.maxAgeMs ?? 60 * 60 * 1000),
      num_replicas: 1,
    });
  } catch (error) {
    // 10058: created meanwhile by another process — fine.
    if (!(error instanceof JetStreamApiError) || error.code !== 10058) throw error;
  }
}

/** Create (or update) the durable consumer the workers of `backend` share. */
export async function ensureBackendConsumer(
  jsm: JetStreamManager,
  names: WireNames,
  backend: string,
  ackWaitMs: number,
): Promise<void> {
  await jsm.consumers.add(names.stream, {
    durable_name: names.consumer(backend),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: names.work(backend),
    ack_wait: nanos(ackWaitMs),
    max_deliver: -1,
  });
}

/** Whether a request failed because nobody listens on the subject. */
export function isNoResponders(error: unknown): boolean {
  if (error instanceof errors.NoRespondersError) return true;
  return error instanceof errors.RequestError && error.isNoResponders();
}

/** Whether a request timed out. */
export function isTimeout(error: unknown): boolean {
  return error instanceof errors.TimeoutError;
}
