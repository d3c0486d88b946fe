/**
 * Test helpers: the spec's receipt schema and fixtures (verbatim copies in
 * `fixtures/harn-receipts/`, whose README says where they come from),
 * synthetic task events shaped like the tasks service's (shared with the
 * benchmarks: `src/testing/`), and a tiny service that appends events
 * through the outbox.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { type Event, type EventPayload, EventSchema } from "@trellis/contracts/core";
import type { ServiceContext, ServiceDefinition } from "@trellis/platform";
import { createSchemaValidator, type SchemaValidator } from "../src/domain/schema.js";

export { type TaskScript, taskEvents } from "../src/testing/task-events.js";

/** The Harn receipt artifacts committed as test fixtures (schema `receipt-2026-04-25`). */
export const receiptsSpecDir = new URL("./fixtures/harn-receipts/", import.meta.url);

/** A JSON file of the spec's receipts directory. */
export function readSpecJson(relative: string): Record<string, unknown> {
  return JSON.parse(readFileSync(new URL(relative, receiptsSpecDir), "utf8")) as Record<
    string,
    unknown
  >;
}

/** Path of the spec's JSON Schema. */
export const receiptSchemaPath = fileURLToPath(
  new URL("schemas/receipt-2026-04-25.schema.json", receiptsSpecDir),
);

let validator: SchemaValidator | undefined;
/** Validator of the spec's `receipt-2026-04-25` JSON Schema (2020-12). */
export function receiptSchemaValidator(): SchemaValidator {
  validator ??= createSchemaValidator(readSpecJson("schemas/receipt-2026-04-25.schema.json"));
  return validator;
}

/** Strip what the outbox assigns, so the events can be appended through it. */
export function forOutbox(events: readonly Event[]): Event[] {
  return events.map((e) => create(EventSchema, { ...e, sequence: 0n, previousEventId: "" }));
}

/** A service that only hands out its context: tests append events through it. */
export function producerService(onContext: (ctx: ServiceContext) => void): ServiceDefinition {
  return {
    name: "producer",
    provides: [],
    defaultPort: 0,
    create(ctx) {
      onContext(ctx);
      return {};
    },
  };
}

/** Append events through the context's outbox (one unit of work: the relay gets them at commit). */
export async function appendEvents(ctx: ServiceContext, events: readonly Event[]): Promise<void> {
  await ctx.outbox.transaction(ctx.db.kysely, async (unit) => {
    unit.add(forOutbox(events));
  });
}

/** Payload type re-export for tests that build events by hand. */
export type { EventPayload };
