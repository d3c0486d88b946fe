/**
 * How the chat handlers reach the tasks service: typed clients resolved per
 * call (embedded clients exist only once every service is built), and the
 * call options that carry the caller and the call's cancellation along.
 */
import type { CallOptions, Client, HandlerContext } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";
import { BlockingReasonsSchema } from "@trellis/contracts/core";
import { EventService, SessionService, TaskService } from "@trellis/contracts/tasks";
import { callerOf, type ServiceClients, setCallerHeaders } from "@trellis/platform";
import { errorDetailOf } from "@trellis/runtime";
import type { DispatchFailure } from "../domain/outcome.js";

/** The tasks-service clients chat uses. */
export interface TasksPort {
  readonly tasks: Client<typeof TaskService>;
  readonly sessions: Client<typeof SessionService>;
  readonly events: Client<typeof EventService>;
}

/** A {@link TasksPort} over the host's service clients, resolved lazily. */
export function tasksPortOf(clients: ServiceClients): TasksPort {
  return {
    get tasks() {
      return clients.get(TaskService);
    },
    get sessions() {
      return clients.get(SessionService);
    },
    get events() {
      return clients.get(EventService);
    },
  };
}

/**
 * Options for a call made on behalf of the RPC being served: its caller (so
 * the tasks service scopes the call to the caller's workspace) and its abort
 * signal (a client that goes away stops the work done for it).
 */
export function onBehalfOf(context: HandlerContext): CallOptions {
  const headers = new Headers();
  const caller = callerOf(context);
  if (caller) setCallerHeaders(headers, caller);
  return { headers, signal: context.signal };
}

/** The facts of a failed call that decide a turn's outcome. */
export function dispatchFailureOf(error: unknown): DispatchFailure {
  const connectError = ConnectError.from(error);
  const detail = errorDetailOf(connectError);
  const [blocking] = connectError.findDetails(BlockingReasonsSchema);
  return {
    code: connectError.code,
    message: connectError.rawMessage,
    ...(detail?.reason ? { reason: detail.reason } : {}),
    ...(detail?.param ? { param: detail.param } : {}),
    ...(detail ? { metadata: detail.metadata } : {}),
    ...(blocking ? { blocking } : {}),
  };
}
