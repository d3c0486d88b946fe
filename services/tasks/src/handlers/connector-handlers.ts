/**
 * ConnectorService: connectors, and their deliveries turned into tasks or
 * transcript messages once per provider delivery id (see
 * `store/connector-store.ts` for how concurrent redeliveries stay one).
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { ActorKind, ActorSchema } from "@trellis/contracts/core";
import {
  BusyPolicy,
  type Connector,
  type ConnectorDelivery,
  ConnectorDeliveryMode,
  type ConnectorService,
  ConnectorStatus,
  CreateConnectorRequestSchema,
} from "@trellis/contracts/tasks";
import { isTrellisError } from "@trellis/runtime";
import {
  checkEventKinds,
  checkName,
  checkStatus,
  deliveryFacts,
  normalizeDelivery,
} from "../domain/connectors.js";
import { invalidRequest } from "../domain/errors.js";
import type { ConnectorStore, RecordedDelivery } from "../store/connector-store.js";
import type { WriteContext } from "../store/task-store.js";
import { type HandlerDeps, idempotencyOf, pageOf, scopeOf, writeContext } from "./common.js";

/** Longest status reason kept. */
const MAX_REASON = 1_000;

export function createConnectorHandlers(
  deps: HandlerDeps,
  connectors: ConnectorStore,
): ServiceImpl<typeof ConnectorService> {
  const { store } = deps;

  /** Targets must exist in the connector's workspace when it is created. */
  async function checkTargets(
    workspaceId: string,
    mode: ConnectorDeliveryMode,
    personaId: string,
    sessionId: string,
    scope: string | undefined,
  ): Promise<void> {
    if (mode === ConnectorDeliveryMode.MESSAGE && !sessionId) {
      throw invalidRequest("a MESSAGE connector needs a target_session_id", "target_session_id");
    }
    if (sessionId) {
      const session = await store.getSession(sessionId, scope);
      if (session.workspaceId !== workspaceId) {
        throw invalidRequest(
          `session ${sessionId} is not in workspace ${workspaceId}`,
          "target_session_id",
        );
      }
    }
    // Agent ids are unique per workspace: the persona is the connector's workspace's.
    if (personaId) await store.getAgent(personaId, workspaceId);
  }

  /** Makes what a recorded delivery becomes, idempotently (keyed by the stored row). */
  async function fulfil(
    connector: Connector,
    recorded: RecordedDelivery,
    caller: WriteContext,
  ): Promise<ConnectorDelivery> {
    const delivery = recorded.delivery;
    // Tasks a connector makes are the connector's (Harn: created_by names it).
    const asConnector: WriteContext = {
      actor: create(ActorSchema, {
        id: connector.id,
        kind: ActorKind.CONNECTOR,
        displayName: connector.provider,
      }),
      scope: connector.workspaceId,
    };
    const idempotency = { key: `connector-delivery:${delivery.id}`, requestHash: delivery.id };
    try {
      if (connector.deliveryMode === ConnectorDeliveryMode.MESSAGE) {
        const appended = await store.appendMessage(
          connector.targetSessionId,
          recorded.input,
          idempotency,
          asConnector,
        );
        return await connectors.complete(
          delivery,
          { sessionId: appended.sessionId, messageId: appended.message?.id ?? "" },
          connector.provider,
          caller,
        );
      }
      const result = await store.submitTask(
        {
          sessionId: connector.targetSessionId,
          agentId: connector.targetPersonaId,
          input: recorded.input,
          busyPolicy: BusyPolicy.ENQUEUE,
          parentTaskId: "",
          metadata: deliveryFacts(connector, delivery.deliveryId, delivery.eventKind),
          createSession: connector.targetSessionId === "",
          workspaceId: connector.workspaceId,
          idempotency,
        },
        asConnector,
        deps.owner,
      );
      deps.runner.dispatch(result.claim);
      return await connectors.complete(
        delivery,
        { taskId: result.task.id, sessionId: result.task.sessionId },
        connector.provider,
        caller,
      );
    } catch (error) {
      // A refusal (closed session, unknown agent …) is recorded and answered;
      // a redelivery tries again. Anything else leaves the delivery RECEIVED.
      if (isTrellisError(error)) {
        await connectors.fail(delivery, error.message, connector.provider, caller);
      }
      throw error;
    }
  }

  return {
    async createConnector(request, context) {
      const write = writeContext(context);
      const workspaceId = connectors.workspaceFor(request.workspaceId, write);
      const provider = checkName(request.provider, "provider");
      const eventKinds = checkEventKinds(request.eventKinds);
      const status =
        request.status === ConnectorStatus.UNSPECIFIED
          ? ConnectorStatus.ACTIVE
          : checkStatus(request.status);
      const mode =
        request.deliveryMode === ConnectorDeliveryMode.UNSPECIFIED
          ? ConnectorDeliveryMode.TASK
          : request.deliveryMode;
      if (ConnectorDeliveryMode[mode] === undefined) {
        throw invalidRequest("delivery_mode must be TASK or MESSAGE", "delivery_mode");
      }
      await checkTargets(
        workspaceId,
        mode,
        request.targetPersonaId,
        request.targetSessionId,
        write.scope,
      );
      const idempotency = idempotencyOf(
        CreateConnectorRequestSchema,
        request,
        request.idempotencyKey,
      );
      const connector = await connectors.create(
        {
          workspaceId,
          provider,
          status,
          eventKinds,
          deliveryMode: mode,
          targetPersonaId: request.targetPersonaId,
          targetSessionId: request.targetSessionId,
          ...(request.metadata ? { metadata: request.metadata } : {}),
        },
        idempotency,
        write,
      );
      return { connector };
    },
    async getConnector(request, context) {
      return { connector: await connectors.get(request.connectorId, scopeOf(context)) };
    },
    async listConnectors(request, context) {
      const workspaceId = connectors.workspaceFor(request.workspaceId, writeContext(context));
      const page = await connectors.list(workspaceId, pageOf(request));
      return { connectors: page.items, nextPageToken: page.nextPageToken };
    },
    async updateConnector(request, context) {
      const status = checkStatus(request.status);
      if (request.reason.length > MAX_REASON) {
        throw invalidRequest(`reason is longer than ${MAX_REASON} characters`, "reason");
      }
      const connector = await connectors.setStatus(
        request.connectorId,
        status,
        request.reason,
        writeContext(context),
      );
      return { connector };
    },
    async deliverConnectorEvent(request, context: HandlerContext) {
      const caller = writeContext(context);
      const connector = await connectors.get(request.connectorId, caller.scope);
      if (connector.status !== ConnectorStatus.ACTIVE) {
        // A paused connector takes nothing new, but what it already made is
        // still the answer to a redelivery.
        const earlier = await connectors.find(connector.id, request.deliveryId);
        if (earlier?.state === "SUBMITTED") return { delivery: earlier, deduplicated: true };
      }
      // Everything is checked before anything is stored.
      const normalized = normalizeDelivery(connector, {
        deliveryId: request.deliveryId,
        eventKind: request.eventKind,
        payload: request.payload,
        text: request.text,
      });
      const recorded = await connectors.record(connector, normalized, caller);
      const delivery =
        recorded.delivery.state === "SUBMITTED"
          ? recorded.delivery
          : await fulfil(connector, recorded, caller);
      return { delivery, deduplicated: !recorded.first };
    },
  };
}
