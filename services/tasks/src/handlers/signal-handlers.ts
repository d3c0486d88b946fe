/** SignalService: the signal coordinator's entry point (input, approval, cancel). */
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { TaskStatus } from "@trellis/contracts/core";
import type { SignalService } from "@trellis/contracts/tasks";
import { invalidRequest } from "../domain/errors.js";
import { cancelChildren } from "./cancel.js";
import { type HandlerDeps, writeContext } from "./common.js";

export function createSignalHandlers(deps: HandlerDeps): ServiceImpl<typeof SignalService> {
  const { store, runner, signals, owner, logger } = deps;
  return {
    async deliver(request, context) {
      if (!request.signalId) throw invalidRequest("signal_id is required", "signal_id");
      const payload = request.payload ? toJson(ValueSchema, request.payload) : null;
      // Durable first: recorded with the task's transition in one transaction.
      // With session_id, signal_id may be the label the agent's author wrote.
      const result = await store.deliverSignal(
        {
          signalId: request.signalId,
          deliveryId: request.deliveryId,
          payload,
          // Without one, a client passing a suspension's author id back as it
          // is still reaches the turn, when it is the only one waiting on it.
          ...(request.sessionId ? { sessionId: request.sessionId } : { labelAlone: true }),
        },
        writeContext(context),
        owner,
      );
      if (result.abort) runner.abort(result.abort, "canceled by signal");
      runner.dispatch(result.claim);
      // A canceled task's delegated tasks are canceled with it.
      if (!result.duplicate && result.task?.status === TaskStatus.CANCELED) {
        await cancelChildren(deps, [result.taskId], writeContext(context), context.signal);
      }
      if (!result.duplicate) {
        // Also on the bus (by the task-unique id), so every consumer sees it;
        // the tasks group finds it already applied.
        const signalId = result.signalId ?? request.signalId;
        const deliveryId = request.deliveryId || signalId;
        signals.deliver({ signalId, deliveryId, payload }).catch((error: unknown) =>
          logger.warn("publishing a delivered signal on the bus failed", {
            signal_id: signalId,
            error: String(error),
          }),
        );
      }
      return {
        taskId: result.taskId,
        duplicate: result.duplicate,
        ...(result.task ? { task: result.task } : {}),
      };
    },
  };
}
