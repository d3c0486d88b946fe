/**
 * Kubernetes JSON schemas for the manifest tests, from the npm registry.
 *
 * Source: `kubernetes-models` 4.3.1 (pinned in package.json), whose
 * `_schemas/*.js` files each hold one JSON Schema generated from the
 * Kubernetes 1.27.1 OpenAPI definitions (with the meta types in
 * `@kubernetes-models/apimachinery`). The schemas are read as data — the JSON
 * object literal in each file — and never executed.
 *
 * They are made strict the way the `-strict` flavour of the
 * kubernetes-json-schema project (openapi2jsonschema --strict) is: every
 * object schema that lists its `properties` gets `additionalProperties: false`
 * unless it says otherwise, so a misspelt or unknown field is an error, as it
 * is for `kubectl apply --validate=strict`. Ajv then compiles them in strict
 * mode (unknown keywords and formats are errors too).
 */
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";

/** The Kubernetes version the schemas describe. */
export const KUBERNETES_VERSION = "1.27.1";

const require = createRequire(import.meta.url);

type Schema = Record<string, unknown>;

function schemaDirectory(packageName: string): string {
  return join(dirname(require.resolve(`${packageName}/package.json`)), "_schemas");
}

const schemaPattern = /const schema = (\{\}|\{[\s\S]*?\n\});\n/;
const idPattern = /register\)\("([^"]+)", schema\)/;

/** Every schema of one package, by definition id (e.g. `io.k8s.api.apps.v1.Deployment`). */
function readSchemas(packageName: string): Map<string, Schema> {
  const dir = schemaDirectory(packageName);
  const out = new Map<string, Schema>();
  for (const file of readdirSync(dir)) {
    if (!file.endsWith(".js")) continue;
    const text = readFileSync(join(dir, file), "utf8");
    const schema = schemaPattern.exec(text)?.[1];
    const id = idPattern.exec(text)?.[1];
    if (!schema || !id) throw new Error(`${packageName}/_schemas/${file}: no schema found`);
    out.set(id, JSON.parse(schema) as Schema);
  }
  return out;
}

/** Forbid properties a schema does not declare, recursively (the `-strict` flavour). */
export function strictify(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) strictify(item);
    return;
  }
  if (node === null || typeof node !== "object") return;
  const schema = node as Schema;
  if (
    schema.properties &&
    typeof schema.properties === "object" &&
    !("additionalProperties" in schema)
  ) {
    schema.additionalProperties = false;
  }
  for (const value of Object.values(schema)) strictify(value);
}

// Kubernetes' quantity grammar (resource.Quantity): a signed number and an
// optional binary-SI, decimal-SI or exponent suffix.
const quantity = /^[+-]?(?:\d+|\d+\.\d*|\.\d+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/;
const int32 = (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31;
const rfc3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/i;

/** A validator of Kubernetes objects against the strict schemas. */
export interface KubeValidator {
  /** Errors of `object` against the schema of its apiVersion/kind; [] when valid. */
  validate(object: { apiVersion?: unknown; kind?: unknown }): string[];
  /** apiVersion/kind pairs it knows, e.g. `apps/v1/Deployment`. */
  kinds(): string[];
}

function describe(error: ErrorObject): string {
  const at = error.instancePath || "(root)";
  if (error.keyword === "additionalProperties") {
    return `${at}: unknown field "${(error.params as { additionalProperty: string }).additionalProperty}"`;
  }
  return `${at}: ${error.message ?? error.keyword}`;
}

/** Load, strictify and compile the schemas (a few seconds; do it once per file). */
export function createKubeValidator(): KubeValidator {
  const ajv = new Ajv({ strict: true, strictTypes: false, allErrors: true });
  // OpenAPI formats the Kubernetes definitions use.
  ajv.addFormat("int32", { type: "number", validate: int32 });
  ajv.addFormat("int64", { type: "number", validate: (n: number) => Number.isSafeInteger(n) });
  ajv.addFormat("double", { type: "number", validate: (n: number) => Number.isFinite(n) });
  ajv.addFormat("byte", /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/);
  ajv.addFormat("date-time", rfc3339);
  ajv.addFormat("quantity", quantity);

  const byKind = new Map<string, string>();
  for (const packageName of ["@kubernetes-models/apimachinery", "kubernetes-models"]) {
    for (const [id, schema] of readSchemas(packageName)) {
      strictify(schema);
      ajv.addSchema(schema, id);
      const properties = schema.properties as Record<string, { enum?: string[] }> | undefined;
      const apiVersion = properties?.apiVersion?.enum?.[0];
      const kind = properties?.kind?.enum?.[0];
      if (apiVersion && kind) byKind.set(`${apiVersion}/${kind}`, id);
    }
  }
  const compiled = new Map<string, ValidateFunction>();
  return {
    kinds: () => [...byKind.keys()].sort(),
    validate(object) {
      const key = `${String(object.apiVersion)}/${String(object.kind)}`;
      const id = byKind.get(key);
      if (!id) return [`no Kubernetes ${KUBERNETES_VERSION} schema for ${key}`];
      let check = compiled.get(id);
      if (!check) {
        check = ajv.getSchema(id);
        if (!check) throw new Error(`schema ${id} did not compile`);
        compiled.set(id, check);
      }
      if (check(object)) return [];
      // A nullable reference is `oneOf: [{$ref}, {type: null}]`: when the
      // reference fails, the null branch's complaint and the oneOf summary
      // only repeat it.
      const errors = (check.errors ?? []).filter(
        (e) =>
          !(e.keyword === "type" && (e.params as { type?: string }).type === "null") &&
          e.keyword !== "oneOf",
      );
      const reported = errors.length > 0 ? errors : (check.errors ?? []);
      return [...new Set(reported.map(describe))];
    },
  };
}
