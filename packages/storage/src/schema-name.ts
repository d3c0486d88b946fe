import { storageError } from "./errors.js";

// Lower-case identifiers only: they need no quoting anywhere (LISTEN channels,
// advisory-lock keys, DDL) and cannot collide by case. 40 characters leaves
// room under Postgres's 63-byte limit for the derived channel name.
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,39}$/;

/**
 * Throws unless `schema` is a valid service schema name: lower-case letters,
 * digits and `_`, starting with a letter or `_`, at most 40 characters, and not
 * one of Postgres's reserved `pg_*` / `information_schema` names.
 */
export function assertSchemaName(schema: string): void {
  if (!SCHEMA_NAME.test(schema) || schema.startsWith("pg_") || schema === "information_schema") {
    throw storageError({
      reason: "invalid_request",
      message: `invalid schema name ${JSON.stringify(schema)}: use lower-case letters, digits and _ (at most 40)`,
      param: "schema",
    });
  }
}
