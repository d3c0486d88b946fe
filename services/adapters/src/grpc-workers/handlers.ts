/** WorkerService: adapter workers in any language over gRPC (see proto/trellis/adapters/v1/worker_service.proto). */
import type { ServiceImpl } from "@connectrpc/connect";
import {
  contractInvalid,
  type ExecutionEvent,
  eventFromProto,
  negotiationFromProto,
  resultFromProto,
} from "@trellis/adapter-sdk";
import type {
  ExecutionEvent as PbEvent,
  WorkerService,
  WorkRef,
} from "@trellis/contracts/adapters";
import type { WorkAttempt, WorkerSession } from "@trellis/execution";
import { announcementFromProto } from "@trellis/execution";
import type { WorkerSessions } from "./sessions.js";

/** Most events one ReportWorkEvents call may carry. */
export const MAX_EVENTS_PER_REPORT = 256;

export function createWorkerHandlers(sessions: WorkerSessions): ServiceImpl<typeof WorkerService> {
  const fenced = (ref: WorkRef | undefined): { session: WorkerSession; work: WorkAttempt } => {
    if (!ref) throw contractInvalid("work", "is required");
    if (ref.executionId === "") throw contractInvalid("work.execution_id", "is required");
    if (ref.attempt < 1) throw contractInvalid("work.attempt", "must be at least 1");
    const session = sessions.live(ref.workerId, ref.session);
    return { session, work: { executionId: ref.executionId, attempt: ref.attempt } };
  };
  const progress = (events: readonly PbEvent[]): ExecutionEvent[] => {
    if (events.length > MAX_EVENTS_PER_REPORT) {
      throw contractInvalid("events", `at most ${MAX_EVENTS_PER_REPORT} per call`);
    }
    return events.map((e, i) => {
      const event = eventFromProto(e, `events[${i}]`);
      if (event.kind === "turn_finished") {
        throw contractInvalid(`events[${i}]`, "turn_finished is reported with CompleteWork");
      }
      return event;
    });
  };
  return {
    async *connectWorker(request, context) {
      const session = sessions.connect(announcementFromProto(request.worker, "worker"));
      try {
        yield {
          command: {
            case: "connected",
            value: { workerId: session.workerId, session: session.token, ttlMs: session.ttlMs },
          },
        };
        yield* session.commands(context.signal);
      } finally {
        // The stream is gone (the worker left, died, or the call was canceled): so is the lease.
        sessions.end(session, session.ended ?? "lost");
      }
    },
    async workerHeartbeat(request) {
      const session = sessions.live(request.workerId, request.session);
      sessions.beat(session, request.inFlight);
      return { ttlMs: session.ttlMs };
    },
    async claimWork(request) {
      const { session, work } = fenced(request.work);
      const negotiation = negotiationFromProto(request.negotiation, "negotiation");
      return sessions.port.claim(session, work, negotiation);
    },
    async reportWorkEvents(request) {
      const { session, work } = fenced(request.work);
      return { current: sessions.port.events(session, work, progress(request.events)) };
    },
    async completeWork(request) {
      const events = progress(request.events);
      const result = resultFromProto(request.result, "result");
      const { session, work } = fenced(request.work);
      // The trailing progress first, in order, then the result (a stale
      // attempt's events are refused by the same fence as ReportWorkEvents).
      if (events.length > 0 && !sessions.port.events(session, work, events)) {
        return { accepted: false };
      }
      return { accepted: await sessions.port.complete(session, work, result) };
    },
    async getWorkSecrets(request) {
      const { session, work } = fenced(request.work);
      return { vaults: await sessions.port.secrets(session, work) };
    },
    async disconnectWorker(request) {
      const session = sessions.live(request.workerId, request.session);
      sessions.end(session, "left");
      return {};
    },
  };
}
