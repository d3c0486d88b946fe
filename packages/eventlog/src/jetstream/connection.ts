/**
 * Connecting to NATS (kept apart from using it, Temporal-style) and the small
 * pieces both JetStream adapters share: stream creation, connection watching,
 * timeouts.
 */

import { existsSync, readFileSync } from "node:fs";
import {
  DiscardPolicy,
  JetStreamApiError,
  type JetStreamClient,
  JetStreamError,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
  type StreamInfo,
} from "@nats-io/jetstream";
import {
  type ConnectionOptions,
  connect,
  credsAuthenticator,
  errors,
  type NatsConnection,
  nanos,
  type Status,
} from "@nats-io/transport-node";
import { isTrellisError, TrellisError } from "@trellis/runtime";
import { validateSubjectPrefix } from "../address.js";
import { unavailable } from "../errors.js";

/** Options of {@link connectNats}. */
export interface ConnectNatsOptions {
  /** `nats://host:port`, one or several. */
  servers: string | string[];
  /** Client name shown by the server (`nats server report connections`). */
  name?: string;
  /** Wait between reconnect attempts (default 250 ms). */
  reconnectTimeWaitMs?: number;
  /** Give up reconnecting after this many attempts (default: never, -1). */
  maxReconnectAttempts?: number;
  /** Connect / request timeout (default 5000 ms). */
  timeoutMs?: number;
  /** Authentication and TLS (see {@link natsSecurityFromEnv}); default none. */
  security?: NatsSecurity;
}

/**
 * How a process authenticates to NATS and secures the connection: at most
 * one of a token, a user and password, or a credentials (JWT + NKey) file;
 * TLS with the server's CA and, for mutual TLS, a client certificate and key.
 */
export interface NatsSecurity {
  token?: string;
  user?: string;
  password?: string;
  /** A `.creds` file, read at every (re)connect so a rotated file is picked up. */
  credsFile?: string;
  /** Require TLS (also implied by any TLS file). */
  tls?: boolean;
  tlsCaFile?: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
}

/** The environment variables {@link natsSecurityFromEnv} reads. */
export const natsSecurityVariables = [
  "NATS_TOKEN",
  "NATS_USER",
  "NATS_PASSWORD",
  "NATS_CREDS_FILE",
  "NATS_TLS",
  "NATS_TLS_CA_FILE",
  "NATS_TLS_CERT_FILE",
  "NATS_TLS_KEY_FILE",
] as const;

function configInvalid(message: string, variable: string): TrellisError {
  return new TrellisError({
    reason: "config_invalid",
    message: `invalid configuration: ${message}`,
    param: variable,
    metadata: { setting: variable },
  });
}

/**
 * NATS authentication and TLS from the environment: `NATS_TOKEN`, or
 * `NATS_USER` + `NATS_PASSWORD`, or `NATS_CREDS_FILE`; `NATS_TLS=true` to
 * require TLS, `NATS_TLS_CA_FILE` (the server's CA), `NATS_TLS_CERT_FILE` +
 * `NATS_TLS_KEY_FILE` (mutual TLS). Checked at start: a config error names
 * the variable (two ways to authenticate, half a pair, a missing file).
 */
export function natsSecurityFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): NatsSecurity {
  const get = (name: (typeof natsSecurityVariables)[number]) => {
    const value = env[name]?.trim();
    return value === undefined || value === "" ? undefined : value;
  };
  const file = (name: (typeof natsSecurityVariables)[number]) => {
    const path = get(name);
    if (path !== undefined && !existsSync(path)) {
      throw configInvalid(`${name} names ${JSON.stringify(path)}, which does not exist`, name);
    }
    return path;
  };
  const token = get("NATS_TOKEN");
  const user = get("NATS_USER");
  const password = get("NATS_PASSWORD");
  const credsFile = file("NATS_CREDS_FILE");
  if ((user === undefined) !== (password === undefined)) {
    throw configInvalid(
      "NATS_USER and NATS_PASSWORD go together",
      user === undefined ? "NATS_USER" : "NATS_PASSWORD",
    );
  }
  const ways = [token, user, credsFile].filter((w) => w !== undefined).length;
  if (ways > 1) {
    throw configInvalid(
      "give one way to authenticate to NATS: NATS_TOKEN, NATS_USER/NATS_PASSWORD or NATS_CREDS_FILE",
      "NATS_TOKEN",
    );
  }
  const tlsRaw = get("NATS_TLS")?.toLowerCase();
  if (tlsRaw !== undefined && tlsRaw !== "true" && tlsRaw !== "false") {
    throw configInvalid(
      `NATS_TLS must be true or false, got ${JSON.stringify(tlsRaw)}`,
      "NATS_TLS",
    );
  }
  const tlsCaFile = file("NATS_TLS_CA_FILE");
  const tlsCertFile = file("NATS_TLS_CERT_FILE");
  const tlsKeyFile = file("NATS_TLS_KEY_FILE");
  if ((tlsCertFile === undefined) !== (tlsKeyFile === undefined)) {
    throw configInvalid(
      "NATS_TLS_CERT_FILE and NATS_TLS_KEY_FILE go together",
      tlsCertFile === undefined ? "NATS_TLS_CERT_FILE" : "NATS_TLS_KEY_FILE",
    );
  }
  const tls =
    tlsRaw === "true" || [tlsCaFile, tlsCertFile].some((f) => f !== undefined) || undefined;
  return {
    ...(token !== undefined ? { token } : {}),
    ...(user !== undefined ? { user, password } : {}),
    ...(credsFile !== undefined ? { credsFile } : {}),
    ...(tls ? { tls } : {}),
    ...(tlsCaFile !== undefined ? { tlsCaFile } : {}),
    ...(tlsCertFile !== undefined ? { tlsCertFile, tlsKeyFile } : {}),
  };
}

/** The nats.js options of {@link NatsSecurity}. */
function securityOptions(security: NatsSecurity | undefined): Partial<ConnectionOptions> {
  if (!security) return {};
  const { credsFile } = security;
  return {
    ...(security.token !== undefined ? { token: security.token } : {}),
    ...(security.user !== undefined ? { user: security.user, pass: security.password } : {}),
    ...(credsFile !== undefined
      ? { authenticator: credsAuthenticator(() => readFileSync(credsFile)) }
      : {}),
    ...(security.tls
      ? {
          tls: {
            ...(security.tlsCaFile ? { caFile: security.tlsCaFile } : {}),
            ...(security.tlsCertFile ? { certFile: security.tlsCertFile } : {}),
            ...(security.tlsKeyFile ? { keyFile: security.tlsKeyFile } : {}),
          },
        }
      : {}),
  };
}

/**
 * Open a NATS connection with the defaults a long-running service wants:
 * reconnect forever, quickly, so a nats-server restart is a pause, not an
 * outage. `noAsyncTraces`: nats.js otherwise builds an Error (a stack
 * capture) for every request and JetStream publish, in case it times out —
 * ~3 % of a worker relay's CPU; a timeout still says which subject and why.
 */
export function connectNats(options: ConnectNatsOptions): Promise<NatsConnection> {
  return connect({
    servers: options.servers,
    name: options.name ?? "trellis",
    noAsyncTraces: true,
    reconnect: true,
    maxReconnectAttempts: options.maxReconnectAttempts ?? -1,
    reconnectTimeWait: options.reconnectTimeWaitMs ?? 250,
    timeout: options.timeoutMs ?? 5000,
    ...securityOptions(options.security),
  });
}

/** Storage and retention options shared by the event and signal streams. */
export interface StreamOptions {
  /** Stream replicas (default 1; 3 in a production cluster). */
  replicas?: number;
  /** `file` (default; survives restarts) or `memory` (tests, caches). */
  storage?: "file" | "memory";
  /** How long a message id is remembered for dedupe (default 24 h). */
  duplicateWindowMs?: number;
  /** Drop messages older than this (default 0: keep forever). */
  maxAgeMs?: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** The stream name for a subject prefix: `trellis` + `EVENTS` → `TRELLIS_EVENTS`. */
export function streamNameFor(prefix: string, suffix: string): string {
  return `${prefix.replaceAll(".", "_").toUpperCase()}_${suffix}`;
}

/** Where a JetStream adapter keeps its messages: a subject prefix and a stream. */
export interface PrefixedStreamOptions extends StreamOptions {
  connection: NatsConnection;
  /** First subject token(s) (default `"trellis"`). */
  prefix?: string;
  /** Stream name (default `<PREFIX>_<SUFFIX>`). */
  streamName?: string;
  /** JetStream API and publish timeout (default 5000 ms). */
  requestTimeoutMs?: number;
}

/** The stream an adapter opened, and its JetStream clients. */
export interface PrefixedStream {
  prefix: string;
  streamName: string;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/**
 * Connect to JetStream and create (or update) the stream of one kind of
 * message under the prefix: `<prefix>.<kind>.>`, in `<PREFIX>_<suffix>`
 * unless a stream name is given. Failures are thrown as {@link natsError}s.
 */
export async function openPrefixedStream(
  options: PrefixedStreamOptions,
  kind: string,
  suffix: string,
): Promise<PrefixedStream> {
  const prefix = options.prefix ?? "trellis";
  validateSubjectPrefix(prefix);
  const streamName = options.streamName ?? streamNameFor(prefix, suffix);
  const timeout = options.requestTimeoutMs ?? 5000;
  try {
    const jsm = await jetstreamManager(options.connection, { timeout });
    await ensureStream(jsm, streamName, `${prefix}.${kind}.>`, options);
    return { prefix, streamName, js: jetstream(options.connection, { timeout }), jsm };
  } catch (err) {
    throw natsError(err);
  }
}

/**
 * Create the stream, or update it when it exists with another configuration
 * (create-or-update, safe to run from every replica at start). A stream with
 * the same name but other subjects belongs to someone else: refuse rather
 * than steal it.
 */
export async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  subject: string,
  options: StreamOptions,
): Promise<StreamInfo> {
  const duplicateWindowMs = options.duplicateWindowMs ?? DAY_MS;
  const config: Partial<StreamConfig> & { name: string; subjects: string[] } = {
    name,
    subjects: [subject],
    storage: options.storage === "memory" ? StorageType.Memory : StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    num_replicas: options.replicas ?? 1,
    duplicate_window: nanos(duplicateWindowMs),
    max_age: nanos(options.maxAgeMs ?? 0),
    // Direct get: cheap last/next-by-subject lookups (sequence heads, signals).
    allow_direct: true,
  };
  try {
    return await jsm.streams.add(config);
  } catch (err) {
    // 10058: stream name already in use with a different configuration.
    if (!(err instanceof JetStreamApiError) || err.code !== 10058) throw err;
  }
  const existing = await jsm.streams.info(name);
  const subjects = existing.config.subjects ?? [];
  if (subjects.length !== 1 || subjects[0] !== subject) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `stream ${name} exists with subjects ${JSON.stringify(subjects)}, expected ["${subject}"]`,
      domain: "trellis.eventlog",
      metadata: { stream: name },
    });
  }
  const { name: _name, storage: _storage, ...mutable } = config;
  return jsm.streams.update(name, { ...existing.config, ...mutable });
}

/**
 * Tracks whether the connection is up, from the client's status events, so a
 * health check can fail at once while the client is reconnecting (a request
 * would otherwise sit in the outbound buffer until it times out).
 */
export class ConnectionWatch {
  #connected = true;
  #stopped = false;
  readonly #statuses: AsyncIterable<Status>;

  constructor(private readonly nc: NatsConnection) {
    this.#statuses = nc.status();
    void this.#run();
  }

  async #run(): Promise<void> {
    try {
      for await (const status of this.#statuses) {
        if (this.#stopped) return;
        if (status.type === "disconnect") this.#connected = false;
        else if (status.type === "reconnect") this.#connected = true;
      }
    } catch {
      // The status stream ends with the connection; nothing to report.
    }
  }

  get connected(): boolean {
    return this.#connected && !this.nc.isClosed();
  }

  stop(): void {
    this.#stopped = true;
    // The runtime object is a QueuedIterator with stop(); end it if we can.
    const stoppable = this.#statuses as { stop?: () => void };
    stoppable.stop?.();
  }
}

/** Reject with `onTimeout()` when `promise` takes longer than `ms`. */
export async function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onTimeout()), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Flush then close a connection, without hanging when the server is gone. */
export async function closeConnection(nc: NatsConnection): Promise<void> {
  if (nc.isClosed()) return;
  await withTimeout(nc.flush(), 1000, () => new Error("flush timeout")).catch(() => {});
  await nc.close();
}

/**
 * Translate what the NATS client throws into a domain error at the boundary
 * (STYLE.md "Errors"): transport trouble → `service_unavailable` (retry),
 * oversized payloads → `payload_too_large`, other JetStream API refusals →
 * `internal_error` (a bug or misconfiguration, not worth retrying). Anything
 * else is not from NATS and is rethrown untouched.
 */
export function natsError(err: unknown): Error {
  if (isTrellisError(err)) return err;
  if (err instanceof errors.InvalidArgumentError && err.message.includes("max_payload")) {
    return tooLarge(err);
  }
  if (err instanceof JetStreamApiError) {
    if (err.code === 10054) return tooLarge(err);
    if (err.status === 503 || err.status === 404 || err.status === 408) {
      return unavailable("nats jetstream", err);
    }
    return new TrellisError({
      reason: "internal_error",
      message: "JetStream refused the request",
      domain: "trellis.eventlog",
      metadata: { code: String(err.code) },
      cause: err,
    });
  }
  if (
    err instanceof errors.TimeoutError ||
    err instanceof errors.RequestError ||
    err instanceof errors.NoRespondersError ||
    err instanceof errors.ClosedConnectionError ||
    err instanceof errors.ConnectionError ||
    err instanceof errors.DrainingConnectionError ||
    err instanceof JetStreamError
  ) {
    return unavailable("nats jetstream", err);
  }
  return err instanceof Error ? err : new Error(String(err));
}

function tooLarge(cause: unknown): TrellisError {
  return new TrellisError({
    reason: "payload_too_large",
    message: "the message exceeds the server's maximum payload",
    domain: "trellis.eventlog",
    cause,
  });
}
