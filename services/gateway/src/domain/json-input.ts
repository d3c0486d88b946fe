/**
 * Reading untrusted JSON request bodies: unknown fields are ignored, a field
 * of the wrong type is refused with `invalid_request` and `param` set to its
 * dotted path (`input.parts[0].text`). `null` counts as absent for optional
 * fields (the spec's nullable fields).
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { checkJsonStructure, defaultStructureLimits, errors, isJsonObject } from "@trellis/runtime";

/** `parent.key` / `parent[index]` paths, without a leading dot. */
export function fieldPath(parent: string, key: string | number): string {
  if (typeof key === "number") return `${parent}[${key}]`;
  return parent === "" ? key : `${parent}.${key}`;
}

function typeName(value: JsonValue | undefined): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return `a ${typeof value}`;
}

/** Whether `value` is a JSON object (the shared one, `@trellis/runtime`). */
export { isJsonObject };

/** `value` as an object, or a 400 naming `path`. */
export function requireObject(value: JsonValue | undefined, path: string): JsonObject {
  if (!isJsonObject(value)) {
    throw errors.invalid(
      `${path === "" ? "the request body" : path} must be an object, got ${typeName(value)}`,
      path === "" ? undefined : path,
    );
  }
  return value;
}

/** A view over one JSON object with typed, path-reporting getters. */
export class JsonReader {
  constructor(
    readonly value: JsonObject,
    readonly path = "",
  ) {}

  /** Read the body of a request: absent / empty → `{}`. */
  static body(value: JsonValue | undefined): JsonReader {
    return new JsonReader(value === undefined ? {} : requireObject(value, ""));
  }

  private at(key: string): string {
    return fieldPath(this.path, key);
  }

  private wrong(key: string, expected: string): never {
    const got = this.value[key];
    throw errors.invalid(`${this.at(key)} must be ${expected}, got ${typeName(got)}`, this.at(key));
  }

  /** Whether the key is present with a non-null value. */
  has(key: string): boolean {
    const v = this.value[key];
    return v !== undefined && v !== null;
  }

  /**
   * The raw value (undefined when absent or null): bounded only by the
   * body-wide limits (task input may carry a long document).
   */
  raw(key: string): JsonValue | undefined {
    const v = this.value[key];
    return v === null ? undefined : v;
  }

  /**
   * Free-form values (metadata, definitions, arguments) become protobuf
   * Structs further in: bound their strings and total size, naming the field.
   * Key counts, depth and value counts were checked on the whole body.
   */
  private bounded(key: string, value: JsonValue): void {
    checkJsonStructure(value, defaultStructureLimits, this.at(key), defaultStructureLimits);
  }

  string(key: string): string | undefined {
    const v = this.value[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "string") this.wrong(key, "a string");
    return v;
  }

  requiredString(key: string): string {
    const v = this.string(key);
    if (v === undefined || v === "") {
      throw errors.invalid(`missing required field: ${this.at(key)}`, this.at(key));
    }
    return v;
  }

  boolean(key: string): boolean | undefined {
    const v = this.value[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "boolean") this.wrong(key, "a boolean");
    return v;
  }

  /** A non-negative safe integer. */
  integer(key: string, options: { min?: number; max?: number } = {}): number | undefined {
    const v = this.value[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isSafeInteger(v)) this.wrong(key, "an integer");
    const min = options.min ?? 0;
    if (v < min || (options.max !== undefined && v > options.max)) {
      throw errors.invalid(
        `${this.at(key)} must be between ${min} and ${options.max ?? "∞"}, got ${v}`,
        this.at(key),
      );
    }
    return v;
  }

  /** One of `values`, exactly. */
  enum<const V extends string>(key: string, values: readonly V[]): V | undefined {
    const v = this.string(key);
    if (v === undefined) return undefined;
    if (!(values as readonly string[]).includes(v)) {
      throw errors.invalid(
        `${this.at(key)} must be one of ${values.join(", ")}, got ${JSON.stringify(v)}`,
        this.at(key),
      );
    }
    return v as V;
  }

  /** A free-form object (metadata, a definition): strings and total size bounded too. */
  object(key: string): JsonObject | undefined {
    const v = this.plainObject(key);
    if (v !== undefined) this.bounded(key, v);
    return v;
  }

  private plainObject(key: string): JsonObject | undefined {
    const v = this.value[key];
    if (v === undefined || v === null) return undefined;
    if (!isJsonObject(v)) this.wrong(key, "an object");
    return v;
  }

  /** A nested reader (undefined when absent). */
  reader(key: string): JsonReader | undefined {
    const v = this.plainObject(key);
    return v === undefined ? undefined : new JsonReader(v, this.at(key));
  }

  array(key: string): JsonValue[] | undefined {
    const v = this.value[key];
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v)) this.wrong(key, "an array");
    return v;
  }

  /** An array of strings. */
  strings(key: string): string[] | undefined {
    const list = this.array(key);
    if (list === undefined) return undefined;
    return list.map((item, i) => {
      if (typeof item !== "string") {
        const path = fieldPath(this.at(key), i);
        throw errors.invalid(`${path} must be a string, got ${typeName(item)}`, path);
      }
      return item;
    });
  }

  /** Readers over an array of objects. */
  objects(key: string): JsonReader[] | undefined {
    const list = this.array(key);
    if (list === undefined) return undefined;
    return list.map((item, i) => {
      const path = fieldPath(this.at(key), i);
      return new JsonReader(requireObject(item, path), path);
    });
  }
}
