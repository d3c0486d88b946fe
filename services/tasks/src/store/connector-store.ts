/**
 * Connectors and their deliveries on PostgreSQL / PGlite.
 *
 * Dedupe rule: a delivery is first stored by one insert guarded by the
 * unique `(connector_id, delivery_id)`. Of concurrent deliveries of one id,
 * exactly one insert wins (the others wait for it, then find its row); only
 * the winner emits `connector.delivery_received` / `connector.normalized`,
 * every other one emits `connector.delivery_deduped`. What the delivery
 * becomes is then made with an idempotency key derived from the stored row,
 * so however many callers (or a redelivery after a crash) try, one task or
 * message exists. No read-then-write decides anything here.
 */
import { create, fromBinary, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Message, MessageSchema } from "@trellis/contracts/core";
import {
  type Connector,
  type ConnectorDelivery,
  type ConnectorDeliveryMode,
  ConnectorDeliverySchema,
  ConnectorSchema,
  ConnectorStatus,
} from "@trellis/contracts/tasks";
import type { Transaction } from "kysely";
import { connectorEvent, deliveryFacts, type NormalizedDelivery } from "../domain/connectors.js";
import { DEFAULT_WORKSPACE_ID } from "../domain/defaults.js";
import { notFound } from "../domain/errors.js";
import type { EventScope } from "../domain/events.js";
import { newId } from "../domain/ids.js";
import { type SchemaStore, type SchemaStoreOptions, schemaStore } from "./event-writer.js";
import type {
  ConnectorDeliveryRow,
  ConnectorRow,
  DeliveryState,
  ExtendedDatabase,
} from "./extended-schema.js";
import { reserveKey } from "./idempotency-keys.js";
import { afterSeq, readPage } from "./paging.js";
import { visible } from "./store-context.js";
import type { Idempotency, Page, PageRequest, WriteContext } from "./task-store.js";

/** Fields of a new connector (already checked by the domain rules). */
export interface NewConnector {
  workspaceId: string;
  provider: string;
  status: ConnectorStatus;
  eventKinds: string[];
  deliveryMode: ConnectorDeliveryMode;
  targetPersonaId: string;
  targetSessionId: string;
  metadata?: { [key: string]: JsonValue };
}

/** A stored delivery and whether this call stored it (false: a redelivery). */
export interface RecordedDelivery {
  delivery: ConnectorDelivery;
  /** The normalized message, as first stored. */
  input: Message;
  first: boolean;
}

/** What a delivery became. */
export interface DeliveryResult {
  taskId?: string;
  sessionId: string;
  messageId?: string;
}

/** Options of {@link PostgresConnectorStore}. */
export type ConnectorStoreOptions = SchemaStoreOptions;

/**
 * The port: connectors and the deliveries they received. Scoping as in
 * `TaskStore`: a connector outside `scope` is `resource_not_found`.
 */
export interface ConnectorStore {
  /** The workspace a write acts in: the caller's, or (internal calls) the one named. */
  workspaceFor(requested: string, context: WriteContext): string;
  create(
    input: NewConnector,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Connector>;
  get(id: string, scope?: string): Promise<Connector>;
  list(workspaceId: string, page: PageRequest): Promise<Page<Connector>>;
  setStatus(
    id: string,
    status: ConnectorStatus,
    reason: string,
    context: WriteContext,
  ): Promise<Connector>;
  /** Stores a delivery once per (connector, delivery id); see the file's header. */
  record(
    connector: Connector,
    normalized: NormalizedDelivery,
    context: WriteContext,
  ): Promise<RecordedDelivery>;
  complete(
    recorded: ConnectorDelivery,
    result: DeliveryResult,
    provider: string,
    context: WriteContext,
  ): Promise<ConnectorDelivery>;
  fail(
    recorded: ConnectorDelivery,
    failure: string,
    provider: string,
    context: WriteContext,
  ): Promise<ConnectorDelivery>;
  find(connectorId: string, deliveryId: string): Promise<ConnectorDelivery | undefined>;
}

/** {@link ConnectorStore} on PostgreSQL / PGlite. */
export class PostgresConnectorStore implements ConnectorStore {
  readonly #store: SchemaStore<ExtendedDatabase>;

  constructor(options: ConnectorStoreOptions) {
    this.#store = schemaStore(options);
  }

  /** The workspace a write acts in: the caller's, or (internal calls) the one named. */
  workspaceFor(requested: string, context: WriteContext): string {
    if (context.scope !== undefined) {
      if (requested && requested !== context.scope) throw notFound("workspace", requested);
      return context.scope;
    }
    return requested || DEFAULT_WORKSPACE_ID;
  }

  async create(
    input: NewConnector,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Connector> {
    const id = newId("conn");
    const keyScope = `${input.workspaceId}|${context.actor.id}|CreateConnector|`;
    const createdId = await this.#store.write(async (trx) => {
      const earlier = await reserveKey(trx, keyScope, idempotency, id);
      if (earlier) return earlier;
      await trx
        .insertInto("connectors")
        .values({
          id,
          workspace_id: input.workspaceId,
          provider: input.provider,
          status: input.status,
          event_kinds: JSON.stringify(input.eventKinds),
          delivery_mode: input.deliveryMode,
          target_persona_id: input.targetPersonaId,
          target_session_id: input.targetSessionId,
          metadata: JSON.stringify(input.metadata ?? {}),
        })
        .execute();
      return id;
    });
    return this.get(createdId, context.scope);
  }

  async get(id: string, scope?: string): Promise<Connector> {
    const row = await this.#store.db
      .selectFrom("connectors")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) throw notFound("connector", id);
    return toConnector(row);
  }

  async list(workspaceId: string, page: PageRequest): Promise<Page<Connector>> {
    return readPage(
      page,
      (window) =>
        afterSeq(
          this.#store.db
            .selectFrom("connectors")
            .selectAll()
            .where("workspace_id", "=", workspaceId),
          window,
        ).execute(),
      (r) => r.seq,
      toConnector,
    );
  }

  /** Sets the status; a connector set FAILED emits `connector.failed`. */
  async setStatus(
    id: string,
    status: ConnectorStatus,
    reason: string,
    context: WriteContext,
  ): Promise<Connector> {
    await this.#store.write(async (trx, emit) => {
      const row = await trx
        .updateTable("connectors")
        .set({ status, status_reason: reason, updated_at: new Date() })
        .where("id", "=", id)
        .where((eb) =>
          context.scope === undefined ? eb.lit(true) : eb("workspace_id", "=", context.scope),
        )
        .returning(["workspace_id", "provider"])
        .executeTakeFirst();
      if (!row) throw notFound("connector", id);
      if (status === ConnectorStatus.FAILED) {
        emit(
          connectorEvent(scopeOf(row.workspace_id, context), "connector.failed", id, {
            connector_id: id,
            provider: row.provider,
            reason,
          }),
        );
      }
    });
    return this.get(id, context.scope);
  }

  /**
   * Stores a delivery once per `(connector, delivery id)`: the first call
   * stores it and emits `delivery_received` and `normalized`; any other
   * (later or concurrent) finds the first one's row and emits
   * `delivery_deduped`.
   */
  async record(
    connector: Connector,
    normalized: NormalizedDelivery,
    context: WriteContext,
  ): Promise<RecordedDelivery> {
    const facts = deliveryFacts(connector, normalized.deliveryId, normalized.eventKind);
    const scope = scopeOf(connector.workspaceId, context);
    return this.#store.write(async (trx, emit) => {
      const inserted = await trx
        .insertInto("connector_deliveries")
        .values({
          id: newId("dlv"),
          connector_id: connector.id,
          delivery_id: normalized.deliveryId,
          workspace_id: connector.workspaceId,
          event_kind: normalized.eventKind,
          state: "RECEIVED",
          input: toBinary(MessageSchema, normalized.message),
        })
        .onConflict((oc) => oc.columns(["connector_id", "delivery_id"]).doNothing())
        .returningAll()
        .executeTakeFirst();
      if (inserted) {
        emit(connectorEvent(scope, "connector.delivery_received", connector.id, facts));
        emit(
          connectorEvent(scope, "connector.normalized", connector.id, {
            ...facts,
            delivery_record_id: inserted.id,
            message_id: normalized.message.id,
          }),
        );
        return toRecorded(inserted, true);
      }
      const existing = await trx
        .selectFrom("connector_deliveries")
        .selectAll()
        .where("connector_id", "=", connector.id)
        .where("delivery_id", "=", normalized.deliveryId)
        .executeTakeFirstOrThrow();
      emit(
        connectorEvent(scope, "connector.delivery_deduped", connector.id, {
          ...facts,
          delivery_record_id: existing.id,
          task_id: existing.task_id,
        }),
      );
      return toRecorded(existing, false);
    });
  }

  /**
   * Records what the delivery became; the first call to do so emits
   * `connector.task_submitted` (a task) — later ones change nothing.
   */
  async complete(
    recorded: ConnectorDelivery,
    result: DeliveryResult,
    provider: string,
    context: WriteContext,
  ): Promise<ConnectorDelivery> {
    return this.#store.write(async (trx, emit) => {
      const row = await this.#settle(trx, recorded.id, "SUBMITTED", {
        task_id: result.taskId ?? "",
        session_id: result.sessionId,
        message_id: result.messageId ?? "",
        failure: "",
      });
      if (row.changed && result.taskId) {
        emit(
          connectorEvent(
            // Outside the session like every event of the connector: a
            // resource's events share one address (and so one sequence).
            scopeOf(recorded.workspaceId, context),
            "connector.task_submitted",
            recorded.connectorId,
            {
              connector_id: recorded.connectorId,
              provider,
              delivery_id: recorded.deliveryId,
              event_kind: recorded.eventKind,
              task_id: result.taskId,
              session_id: result.sessionId,
            },
            result.taskId,
          ),
        );
      }
      return toDelivery(row.row);
    });
  }

  /** Records that the delivery could not become a task or message (`connector.failed`). */
  async fail(
    recorded: ConnectorDelivery,
    failure: string,
    provider: string,
    context: WriteContext,
  ): Promise<ConnectorDelivery> {
    return this.#store.write(async (trx, emit) => {
      const row = await this.#settle(trx, recorded.id, "FAILED", { failure });
      if (row.changed) {
        emit(
          connectorEvent(
            scopeOf(recorded.workspaceId, context),
            "connector.failed",
            recorded.connectorId,
            {
              connector_id: recorded.connectorId,
              provider,
              delivery_id: recorded.deliveryId,
              event_kind: recorded.eventKind,
              reason: failure,
            },
          ),
        );
      }
      return toDelivery(row.row);
    });
  }

  /** A delivery already stored for `(connector, delivery id)`, if any (reads only). */
  async find(connectorId: string, deliveryId: string): Promise<ConnectorDelivery | undefined> {
    const row = await this.#store.db
      .selectFrom("connector_deliveries")
      .selectAll()
      .where("connector_id", "=", connectorId)
      .where("delivery_id", "=", deliveryId)
      .executeTakeFirst();
    return row ? toDelivery(row) : undefined;
  }

  /** Moves a delivery that is not SUBMITTED yet to `state`; a SUBMITTED one stays as it is. */
  async #settle(
    trx: Transaction<ExtendedDatabase>,
    id: string,
    state: DeliveryState,
    set: { task_id?: string; session_id?: string; message_id?: string; failure?: string },
  ): Promise<{ row: ConnectorDeliveryRow; changed: boolean }> {
    const updated = await trx
      .updateTable("connector_deliveries")
      .set({ state, ...set })
      .where("id", "=", id)
      .where("state", "!=", "SUBMITTED")
      .returningAll()
      .executeTakeFirst();
    if (updated) return { row: updated, changed: true };
    const row = await trx
      .selectFrom("connector_deliveries")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
    return { row, changed: false };
  }
}

function scopeOf(workspaceId: string, context: WriteContext): EventScope {
  return { workspaceId, sessionId: "", actor: context.actor };
}

function toConnector(row: ConnectorRow): Connector {
  return create(ConnectorSchema, {
    id: row.id,
    workspaceId: row.workspace_id,
    provider: row.provider,
    status: row.status,
    statusReason: row.status_reason,
    eventKinds: row.event_kinds,
    deliveryMode: row.delivery_mode,
    targetPersonaId: row.target_persona_id,
    targetSessionId: row.target_session_id,
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
    metadata: row.metadata,
  });
}

function toDelivery(row: ConnectorDeliveryRow): ConnectorDelivery {
  return create(ConnectorDeliverySchema, {
    id: row.id,
    connectorId: row.connector_id,
    workspaceId: row.workspace_id,
    deliveryId: row.delivery_id,
    eventKind: row.event_kind,
    state: row.state,
    taskId: row.task_id,
    sessionId: row.session_id,
    messageId: row.message_id,
    failure: row.failure,
    createdAt: timestampFromDate(row.created_at),
  });
}

function toRecorded(row: ConnectorDeliveryRow, first: boolean): RecordedDelivery {
  return { delivery: toDelivery(row), input: fromBinary(MessageSchema, row.input), first };
}
