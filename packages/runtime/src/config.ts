/**
 * Typed environment configuration. Each service declares the variables it
 * reads in `config.ts`; `main.ts` calls {@link loadConfig} with `process.env`
 * once at start, and a bad value stops the process with a message that names
 * the variable and says what was expected.
 */
import { TrellisError } from "./errors.js";
import { isSecretKey } from "./logger.js";

const invalid: unique symbol = Symbol("invalid");

/**
 * One environment variable: how to parse it, what it must look like, and
 * whether it has a default or may be absent. Build with {@link env}.
 * Empty strings count as unset (so `FOO=` in a compose file means "default").
 */
export interface ConfigField<T> {
  /** What a valid value looks like, for error messages ("an integer between 1 and 65535"). */
  readonly expected: string;
  /** Whether the variable's value must never be echoed in messages. */
  readonly isSecret: boolean;
  /** Parse a non-empty raw value. @internal */
  readonly parse: (raw: string) => T | typeof invalid;
  /** The value when unset; `invalid` when the variable is required. @internal */
  readonly fallback: T | typeof invalid;
  /** Use `value` when the variable is unset. */
  default(value: NonNullable<T>): ConfigField<NonNullable<T>>;
  /** Allow the variable to be unset (the value is then `undefined`). */
  optional(): ConfigField<T | undefined>;
  /** Never echo the value in error messages (names that look secret are already). */
  secret(): ConfigField<T>;
}

function field<T>(
  expected: string,
  parse: (raw: string) => T | typeof invalid,
  // No default parameter here: `optional()` passes undefined as a real fallback.
  fallback: T | typeof invalid,
  isSecret: boolean,
): ConfigField<T> {
  return {
    expected,
    parse,
    fallback,
    isSecret,
    default: (value) =>
      field<NonNullable<T>>(
        expected,
        parse as (raw: string) => NonNullable<T> | typeof invalid,
        value,
        isSecret,
      ),
    optional: () => field<T | undefined>(expected, parse, undefined, isSecret),
    secret: () => field(expected, parse, fallback, true),
  };
}

function required<T>(expected: string, parse: (raw: string) => T | typeof invalid): ConfigField<T> {
  return field(expected, parse, invalid, false);
}

/** Options of {@link env.int}. */
export interface IntOptions {
  min?: number;
  max?: number;
}

/** Options of {@link env.url}. */
export interface UrlOptions {
  /** Allowed schemes, with or without the colon (`"postgres"`, `"nats:"`). */
  protocols?: readonly string[];
}

/** Options of {@link env.duration}. */
export interface DurationOptions {
  /** Smallest allowed value in milliseconds. */
  minMs?: number;
  /** Largest allowed value in milliseconds. */
  maxMs?: number;
}

const durationUnits: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const durationPart = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;

/** Parse `"250ms"`, `"10s"`, `"1m30s"`, `"2h"` or a bare number of milliseconds. */
export function parseDurationMs(raw: string): number | undefined {
  const text = raw.trim();
  if (/^\d+$/.test(text)) return Number(text);
  if (text === "") return undefined;
  let total = 0;
  durationPart.lastIndex = 0;
  while (durationPart.lastIndex < text.length) {
    const match = durationPart.exec(text);
    if (match === null) return undefined;
    total += Number(match[1]) * durationUnits[match[2]!]!;
  }
  return Math.round(total);
}

function range(min: number | undefined, max: number | undefined, unit = ""): string {
  if (min !== undefined && max !== undefined) return ` between ${min}${unit} and ${max}${unit}`;
  if (min !== undefined) return ` of at least ${min}${unit}`;
  if (max !== undefined) return ` of at most ${max}${unit}`;
  return "";
}

/**
 * Builders for {@link ConfigField}s.
 *
 * @example
 *   export const configSchema = {
 *     DATABASE_URL: env.url({ protocols: ["postgres", "postgresql"] }),
 *     NATS_URL: env.url({ protocols: ["nats"] }).default("nats://127.0.0.1:4222"),
 *     PORT: env.port().default(8080),
 *     MODE: env.enum(["embedded", "production"]).default("embedded"),
 *     DEBUG: env.bool().default(false),
 *     SHUTDOWN_GRACE: env.duration().default(10_000),
 *     OPENAI_API_KEY: env.string().optional(),
 *   };
 */
export const env = {
  /** Any non-empty string. */
  string(): ConfigField<string> {
    return required("a non-empty string", (raw) => raw);
  },
  /** An absolute URL; the value is the string as given (after validation). */
  url(options: UrlOptions = {}): ConfigField<string> {
    const protocols = options.protocols?.map((p) => (p.endsWith(":") ? p : `${p}:`));
    const expected = protocols
      ? `a URL with scheme ${protocols.map((p) => p.slice(0, -1)).join(" or ")} (e.g. ${protocols[0]}//host:port)`
      : "an absolute URL (e.g. https://host:port)";
    return required(expected, (raw) => {
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        return invalid;
      }
      if (protocols && !protocols.includes(url.protocol)) return invalid;
      return raw;
    });
  },
  /** A base-10 integer. */
  int(options: IntOptions = {}): ConfigField<number> {
    const { min, max } = options;
    return required(`an integer${range(min, max)}`, (raw) => {
      if (!/^[+-]?\d+$/.test(raw.trim())) return invalid;
      const value = Number(raw);
      if (!Number.isSafeInteger(value)) return invalid;
      if ((min !== undefined && value < min) || (max !== undefined && value > max)) return invalid;
      return value;
    });
  },
  /** A TCP port, 0–65535 (0 = any free port). */
  port(): ConfigField<number> {
    return env.int({ min: 0, max: 65535 });
  },
  /** `true/false`, `1/0`, `yes/no`, `on/off` (any case). */
  bool(): ConfigField<boolean> {
    return required("a boolean (true/false, 1/0, yes/no, on/off)", (raw) => {
      const value = raw.trim().toLowerCase();
      if (value === "true" || value === "1" || value === "yes" || value === "on") return true;
      if (value === "false" || value === "0" || value === "no" || value === "off") return false;
      return invalid;
    });
  },
  /** One of a fixed set of strings (exact match). */
  enum<const V extends string>(values: readonly V[]): ConfigField<V> {
    return required(`one of ${values.join(", ")}`, (raw) =>
      (values as readonly string[]).includes(raw) ? (raw as V) : invalid,
    );
  },
  /** A duration such as `500ms`, `10s`, `1m30s`, `2h`, or a number of milliseconds; the value is in ms. */
  duration(options: DurationOptions = {}): ConfigField<number> {
    const { minMs, maxMs } = options;
    return required(`a duration such as 500ms, 10s, 1m30s${range(minMs, maxMs, "ms")}`, (raw) => {
      const value = parseDurationMs(raw);
      if (value === undefined) return invalid;
      if ((minMs !== undefined && value < minMs) || (maxMs !== undefined && value > maxMs)) {
        return invalid;
      }
      return value;
    });
  },
};

/** A service's declared variables, by name. */
export type ConfigSchema = Readonly<Record<string, ConfigField<unknown>>>;

/** The typed configuration a schema produces. */
export type ConfigOf<S extends ConfigSchema> = {
  readonly [K in keyof S]: S[K] extends ConfigField<infer T> ? T : never;
};

// Show what was given, without ever echoing a secret or a URL's password.
function shown(name: string, spec: ConfigField<unknown>, raw: string): string {
  if (spec.isSecret || isSecretKey(name)) return "a value (hidden)";
  const masked = raw.replace(/(\/\/[^/\s:@]*):[^@\s/]+@/, "$1:***@");
  return JSON.stringify(masked.length > 80 ? `${masked.slice(0, 80)}…` : masked);
}

/**
 * Read and validate `schema` from `source` (pass `process.env` from main.ts).
 * All problems are reported at once.
 *
 * @throws TrellisError with reason `config_invalid`; the message names every
 *   bad variable and what it expects, e.g.
 *   `invalid configuration: PORT must be an integer between 0 and 65535, got "http"`.
 *   `param` is the first bad variable; `metadata.variables` lists all of them.
 */
export function loadConfig<S extends ConfigSchema>(
  schema: S,
  source: Readonly<Record<string, string | undefined>>,
): ConfigOf<S> {
  const result: Record<string, unknown> = {};
  const problems: string[] = [];
  const names: string[] = [];
  for (const [name, spec] of Object.entries(schema)) {
    const raw = source[name];
    if (raw === undefined || raw === "") {
      if (spec.fallback === invalid) {
        problems.push(`${name} is required: set it to ${spec.expected}`);
        names.push(name);
      } else {
        result[name] = spec.fallback;
      }
      continue;
    }
    const value = spec.parse(raw);
    if (value === invalid) {
      problems.push(`${name} must be ${spec.expected}, got ${shown(name, spec, raw)}`);
      names.push(name);
    } else {
      result[name] = value;
    }
  }
  if (problems.length > 0) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `invalid configuration: ${problems.join("; ")}`,
      param: names[0],
      metadata: { variables: names.join(",") },
    });
  }
  return Object.freeze(result) as ConfigOf<S>;
}
