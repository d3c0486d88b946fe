/** WorkerService: adapter workers in any language over gRPC (see proto/trellis/adapters/v1/worker_service.proto). */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  contractInvalid,
  type ExecutionEvent,
  eventFromProto,
  negotiationFromProto,
  resultFromProto,
} from "@trellis/adapter-sdk";
import type {
  ExecutionEvent as PbEvent,
  WorkerCallErrorSchema,
  WorkerChannelRequest,
  WorkerChannelResponseSchema,
  WorkerService,
  WorkRef,
} from "@trellis/contracts/adapters";
import { errorDetailOf, isTrellisError, toConnectError } from "@trellis/runtime";
import { announcementFromProto } from "../routing/announcement.js";
import type { WorkAttempt, WorkerSession } from "./session.js";
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
  const impl: Omit<ServiceImpl<typeof WorkerService>, "workerChannel"> = {
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
      // attempt's events are refused by the same fence as the result).
      return { accepted: await sessions.port.complete(session, work, result, events) };
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
  return {
    ...impl,
    workerChannel: (requests, context) => workerChannel(sessions, impl, requests, context),
  };
}

type ChannelAnswer = MessageInitShape<typeof WorkerChannelResponseSchema>;
type ChannelBody = ChannelAnswer["body"];

/** A failed channel call as the unary call's error would have said it. */
export function callError(error: unknown): MessageInitShape<typeof WorkerCallErrorSchema> {
  const wire = isTrellisError(error)
    ? toConnectError(error)
    : error instanceof ConnectError
      ? error
      : new ConnectError("internal error", Code.Internal);
  const detail = errorDetailOf(wire);
  return {
    code: wire.code,
    message: wire.rawMessage,
    reason: detail?.reason ?? "",
    param: detail?.param ?? "",
  };
}

/**
 * One call of the channel, started at once (in the order sent: what a call
 * does before it first waits — events published, a claim forwarded — is
 * done in that order) and answered when it is done.
 */
function channelCall(
  impl: Omit<ServiceImpl<typeof WorkerService>, "workerChannel">,
  call: WorkerChannelRequest,
  context: HandlerContext,
): Promise<ChannelBody> {
  const { body } = call;
  switch (body.case) {
    case "claim":
      return Promise.resolve(impl.claimWork(body.value, context)).then((value) => ({
        case: "claimed",
        value,
      }));
    case "report":
      return Promise.resolve(impl.reportWorkEvents(body.value, context)).then((value) => ({
        case: "reported",
        value,
      }));
    case "complete":
      return Promise.resolve(impl.completeWork(body.value, context)).then((value) => ({
        case: "completed",
        value,
      }));
    case "heartbeat":
      return Promise.resolve(impl.workerHeartbeat(body.value, context)).then((value) => ({
        case: "beat",
        value,
      }));
    case "connect":
      return Promise.reject(contractInvalid("connect", "only the first message of a channel"));
    default:
      return Promise.reject(contractInvalid("body", "is required"));
  }
}

/**
 * WorkerChannel: ConnectWorker, then the worker's calls and their answers
 * on the same stream. The session ends with the stream (either side).
 */
async function* workerChannel(
  sessions: WorkerSessions,
  impl: Omit<ServiceImpl<typeof WorkerService>, "workerChannel">,
  requests: AsyncIterable<WorkerChannelRequest>,
  context: HandlerContext,
): AsyncGenerator<ChannelAnswer> {
  const input = requests[Symbol.asyncIterator]();
  const first = await input.next();
  if (first.done) return;
  if (first.value.body.case !== "connect") {
    throw contractInvalid("body", "the first message of a channel must be connect");
  }
  const session = sessions.connect(
    announcementFromProto(first.value.body.value.worker, "connect.worker"),
  );
  const answers: ChannelAnswer[] = [];
  let wake: (() => void) | undefined;
  const woken = () => {
    const resolve = wake;
    wake = undefined;
    session.waiter = undefined;
    resolve?.();
  };
  let inputOver = false;
  const reading = (async () => {
    try {
      for (;;) {
        const next = await input.next();
        if (next.done) return;
        const { callId } = next.value;
        channelCall(impl, next.value, context).then(
          (body) => {
            answers.push({ callId, body });
            woken();
          },
          (error: unknown) => {
            answers.push({ callId, body: { case: "error", value: callError(error) } });
            woken();
          },
        );
      }
    } catch {
      // The stream broke: the session ends below.
    } finally {
      inputOver = true;
      woken();
    }
  })();
  context.signal.addEventListener("abort", woken);
  try {
    yield {
      body: {
        case: "command",
        value: {
          command: {
            case: "connected",
            value: { workerId: session.workerId, session: session.token, ttlMs: session.ttlMs },
          },
        },
      },
    };
    for (;;) {
      // Both queues are looked at again after every yield: what is queued
      // while one is sent (no waiter is set then) must not wait for the
      // next wake-up (a heartbeat's answer, up to a heartbeat later).
      for (;;) {
        const command = session.nextCommand();
        if (command) {
          yield { body: { case: "command", value: command } };
          continue;
        }
        const answer = answers.shift();
        if (!answer) break;
        yield answer;
      }
      if (session.ended || inputOver || context.signal.aborted) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
        session.waiter = woken;
      });
    }
  } finally {
    context.signal.removeEventListener("abort", woken);
    // The stream is gone (the worker left, died, or the call was canceled): so is the lease.
    sessions.end(session, session.ended ?? "lost");
    void input.return?.().catch(() => undefined);
    void reading;
  }
}
