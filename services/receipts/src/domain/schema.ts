/**
 * JSON Schema 2020-12 validation of receipt documents (Receipts README,
 * "Verification contract" step 1), with ajv's 2020 build and the standard
 * formats (`date-time`).
 *
 * The schema itself is the spec's `receipt-2026-04-25.schema.json`; it is
 * not copied into Trellis. Whoever has it (tests, the CLI, the service when
 * `TRELLIS_RECEIPT_SCHEMA_FILE` is set) passes its parsed JSON here.
 *
 * Pure: no I/O.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";

// ajv-formats is CommonJS; under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

/** Validates a document; returns one message per error (empty when valid). */
export type SchemaValidator = (document: unknown) => string[];

/** A validator for a JSON Schema 2020-12 document. */
export function createSchemaValidator(schema: object): SchemaValidator {
  // strict: false — the schema is third-party; unknown keywords are not ours to reject.
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  addFormats(ajv);
  const validate = ajv.compile(schema);
  return (document) => {
    if (validate(document)) return [];
    return (validate.errors ?? []).map(
      (e) =>
        `${e.instancePath || "/"} ${e.message ?? "is invalid"}${
          e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ""
        }`,
    );
  };
}
