/**
 * Structured JSON logs: one object per line on stdout, with the service name,
 * and the request id / trace id of the call being served when there is one.
 *
 * Writes are buffered and flushed once per event-loop turn (errors are flushed
 * at once), because `process.stdout` on a pipe or file is synchronous on Linux
 * and one `write(2)` per log line would sit on the request path.
 */
import { context, trace } from "@opentelemetry/api";
import { requestIdFromContext } from "./request-id.js";

/** Severity of a log line, lowest first. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** Extra facts attached to a log line. Secrets are redacted by key name (see {@link isSecretKey}). */
export type LogFields = Readonly<Record<string, unknown>>;

/**
 * A structured logger. Lines below the logger's level cost one comparison.
 *
 * @example
 *   const log = createLogger({ service: "tasks" });
 *   log.info("task started", { task_id: "tsk_1" });
 *   // {"time":"…","level":"info","service":"tasks","msg":"task started","task_id":"tsk_1"}
 */
export interface Logger {
  /** The lowest level this logger writes. */
  readonly level: LogLevel;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Whether a line at `level` would be written (guard expensive field building with it). */
  enabled(level: LogLevel): boolean;
  /** A logger that adds `fields` to every line. */
  child(fields: LogFields): Logger;
  /** Write buffered lines now (synchronously). */
  flush(): void;
}

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Service name written on every line. */
  service: string;
  /**
   * Lowest level written. Defaults to `TRELLIS_LOG_LEVEL` from {@link LoggerOptions.env}
   * (or `process.env`), else `info`.
   */
  level?: LogLevel;
  /** Environment to read `TRELLIS_LOG_LEVEL` from; defaults to `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * Where lines go; receives one or more complete lines ending in `\n`.
   * Defaults to a buffered writer on `process.stdout`. Tests pass an array push.
   */
  write?: (chunk: string) => void;
}

const levelRank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** Parse a level name (case-insensitive); undefined when it is not one. */
export function parseLogLevel(value: string | undefined): LogLevel | undefined {
  if (value === undefined) return undefined;
  const lower = value.trim().toLowerCase();
  if (lower === "warning") return "warn";
  return lower in levelRank ? (lower as LogLevel) : undefined;
}

// Keys the line itself owns; a field with the same name is renamed, never allowed to
// overwrite them (a `level` field must not change how a line is filtered downstream).
const reservedKeys = new Set(["time", "level", "service", "msg"]);

/**
 * Create a JSON logger.
 *
 * Every line carries `time`, `level`, `service`, `msg`, then `request_id`,
 * `trace_id` and `span_id` when logged while serving a call (read from the
 * active OpenTelemetry context, which the server's tracing interceptor sets),
 * then the fields. Fields whose name looks like a secret (authorization,
 * api_key, token, secret, password, cookie, …) are printed as `"[REDACTED]"`,
 * at any depth, and passwords inside URLs are masked.
 */
export function createLogger(options: LoggerOptions): Logger {
  const level =
    options.level ??
    parseLogLevel((options.env ?? process.env).TRELLIS_LOG_LEVEL) ??
    ("info" satisfies LogLevel);
  const write = options.write ?? stdoutSink.write;
  const flush = options.write ? () => {} : stdoutSink.flush;
  return makeLogger(options.service, level, write, flush, undefined);
}

function makeLogger(
  service: string,
  level: LogLevel,
  write: (chunk: string, urgent: boolean) => void,
  flush: () => void,
  bound: Record<string, unknown> | undefined,
): Logger {
  const min = levelRank[level];
  // The line prefix never changes for this logger: build it once.
  const serviceJson = JSON.stringify(service);
  const emit = (lvl: LogLevel, msg: string, fields: LogFields | undefined): void => {
    const line: Record<string, unknown> = {};
    const active = context.active();
    const requestId = requestIdFromContext(active);
    if (requestId !== undefined) line.request_id = requestId;
    const spanContext = trace.getSpanContext(active);
    if (spanContext !== undefined) {
      line.trace_id = spanContext.traceId;
      line.span_id = spanContext.spanId;
    }
    if (bound !== undefined) Object.assign(line, bound);
    if (fields !== undefined) copyFields(line, fields);
    const rest = JSON.stringify(line);
    const head = `{"time":"${new Date().toISOString()}","level":"${lvl}","service":${serviceJson},"msg":${JSON.stringify(msg)}`;
    write(rest === "{}" ? `${head}}\n` : `${head},${rest.slice(1)}\n`, lvl === "error");
  };
  return {
    level,
    debug: (msg, fields) => {
      if (min <= 10) emit("debug", msg, fields);
    },
    info: (msg, fields) => {
      if (min <= 20) emit("info", msg, fields);
    },
    warn: (msg, fields) => {
      if (min <= 30) emit("warn", msg, fields);
    },
    error: (msg, fields) => emit("error", msg, fields),
    enabled: (lvl) => levelRank[lvl] >= min,
    child: (fields) => {
      const merged: Record<string, unknown> = { ...bound };
      copyFields(merged, fields);
      return makeLogger(service, level, write, flush, merged);
    },
    flush,
  };
}

function copyFields(target: Record<string, unknown>, fields: LogFields): void {
  const seen = new WeakSet<object>();
  for (const key of Object.keys(fields)) {
    const name = reservedKeys.has(key) ? `field_${key}` : key;
    target[name] = isSecretKey(key) ? REDACTED : sanitize(fields[key], 0, seen);
  }
}

const REDACTED = "[REDACTED]";
const MAX_DEPTH = 6;
const MAX_ARRAY = 50;

/** Turn a field value into something JSON.stringify prints faithfully and safely. */
function sanitize(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  switch (typeof value) {
    case "string":
      return maskUrlPassword(value);
    case "number":
    case "boolean":
    case "undefined":
      return value;
    case "bigint":
      return value.toString();
    case "symbol":
    case "function":
      return String(value);
  }
  if (value === null) return null;
  const object = value as object;
  if (seen.has(object)) return "[Circular]";
  if (depth >= MAX_DEPTH) return "[Truncated]";
  seen.add(object);
  try {
    if (object instanceof Error) return serializeError(object, depth, seen);
    if (object instanceof Date) return Number.isNaN(object.getTime()) ? null : object.toISOString();
    if (object instanceof Uint8Array) return `[${object.byteLength} bytes]`;
    if (object instanceof Headers) {
      const out: Record<string, string> = {};
      object.forEach((v, k) => {
        out[k] = isSecretKey(k) ? REDACTED : v;
      });
      return out;
    }
    if (Array.isArray(object)) {
      const items = object.slice(0, MAX_ARRAY).map((v) => sanitize(v, depth + 1, seen));
      if (object.length > MAX_ARRAY) items.push(`[${object.length - MAX_ARRAY} more]`);
      return items;
    }
    if (object instanceof Map) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of object) {
        const key = String(k);
        out[key] = isSecretKey(key) ? REDACTED : sanitize(v, depth + 1, seen);
      }
      return out;
    }
    if (object instanceof Set) return sanitize([...object], depth, seen);
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(object)) {
      out[key] = isSecretKey(key)
        ? REDACTED
        : sanitize((object as Record<string, unknown>)[key], depth + 1, seen);
    }
    return out;
  } finally {
    seen.delete(object);
  }
}

function serializeError(error: Error, depth: number, seen: WeakSet<object>): unknown {
  const out: Record<string, unknown> = {
    name: error.name,
    message: maskUrlPassword(error.message),
  };
  // Domain and Connect errors carry the facts a reader needs to act on.
  const extra = error as Error & { reason?: unknown; code?: unknown; rawMessage?: unknown };
  if (typeof extra.reason === "string") out.reason = extra.reason;
  if (extra.code !== undefined && typeof extra.code !== "object") out.code = extra.code;
  if (error.stack !== undefined) out.stack = maskUrlPassword(error.stack);
  if (error.cause !== undefined) out.cause = sanitize(error.cause, depth + 1, seen);
  return out;
}

// scheme://user:password@host → scheme://user:***@host (DATABASE_URL in an error message).
const urlPassword = /([a-z][a-z0-9+.-]*:\/\/[^/\s:@]*):[^@\s/]+@/gi;

function maskUrlPassword(text: string): string {
  // Cheap pre-check: most strings have no "://", and the regex is the expensive part.
  return text.includes("://") && text.includes("@") ? text.replace(urlPassword, "$1:***@") : text;
}

// Words that make a key secret wherever they appear in it ("x-api-key", "clientSecret",
// "refresh_token"). "tokens" (plural) is deliberately absent: token *counts* such as
// `max_tokens` and `input_tokens` are everywhere in model-provider logs and are not secret.
const secretWords = new Set([
  "authorization",
  "password",
  "passwd",
  "passphrase",
  "secret",
  "secrets",
  "token",
  "apikey",
  "cookie",
  "credential",
  "credentials",
  "privatekey",
]);
// Two-word secrets ("api key", "private key", "access key", "session key").
const secretPairs = new Set(["api key", "private key", "access key", "session key", "signing key"]);
const secretKeyCache = new Map<string, boolean>();

/**
 * Whether a field or header name names a secret: one of its words (split on
 * camelCase and separators) is authorization, password, secret, token, apikey,
 * cookie, credential(s), or it contains "api key" / "private key" / "access key".
 *
 * @example isSecretKey("x-api-key") // true
 * @example isSecretKey("refreshToken") // true
 * @example isSecretKey("max_tokens") // false
 */
export function isSecretKey(key: string): boolean {
  const cached = secretKeyCache.get(key);
  if (cached !== undefined) return cached;
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== "");
  let secret = false;
  for (let i = 0; i < words.length && !secret; i++) {
    const word = words[i]!;
    if (secretWords.has(word)) secret = true;
    else if (i + 1 < words.length && secretPairs.has(`${word} ${words[i + 1]}`)) secret = true;
  }
  // Bound the cache: keys are normally a small fixed set, but a caller logging
  // user-controlled keys must not grow memory without limit.
  if (secretKeyCache.size < 4096) secretKeyCache.set(key, secret);
  return secret;
}

/** The process-wide stdout writer shared by every default logger, so lines stay ordered. */
const stdoutSink = (() => {
  let pending: string[] = [];
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (pending.length === 0) return;
    const chunk = pending.length === 1 ? pending[0]! : pending.join("");
    pending = [];
    process.stdout.write(chunk);
  };
  let exitHooked = false;
  const write = (chunk: string, urgent: boolean): void => {
    pending.push(chunk);
    if (!exitHooked) {
      // Lines still buffered when the process exits (process.exit, end of the loop)
      // are written synchronously from the exit hook.
      exitHooked = true;
      process.once("exit", flush);
    }
    if (urgent) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush).unref();
    }
  };
  return { write, flush };
})();
