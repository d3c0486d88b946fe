// SendStreaming reads the task's events until the one that settles it. The
// event stream must end then, not when the whole call does: a caller that
// takes the outcome and leaves without aborting would leave this handler
// suspended at that yield for good, and with it the tasks service's stream.
import { create } from "@bufbuild/protobuf";
import { ChatService, type SendStreamingRequest } from "@trellis/contracts/chat";
import { EventSchema, TaskStatus } from "@trellis/contracts/core";
import { TaskSchema } from "@trellis/contracts/tasks";
import { chatToMessage } from "@trellis/messages";
import { directCallContext } from "@trellis/testkit";
import { describe, expect, it } from "vitest";
import { loadChatConfig } from "../src/config.js";
import { createChatHandler } from "../src/handlers/chat-handler.js";
import type { TasksPort } from "../src/handlers/tasks-port.js";

const taskId = "task_s";
const settledEvent = create(EventSchema, {
  id: "evt_settled",
  kind: "task.status",
  resource: { object: "task", id: taskId },
  taskId,
  payload: {
    kind: {
      case: "taskStatusChanged",
      value: { status: TaskStatus.COMPLETED, previousStatus: TaskStatus.WORKING },
    },
  },
});

describe("SendStreaming ends the task's event stream", () => {
  it("once the settling event is read, before the outcome goes out", async () => {
    let streamSignal: AbortSignal | undefined;
    const port = {
      tasks: {
        submitTask: async () => ({ task: create(TaskSchema, { id: taskId }) }),
        async *watchTask() {
          yield { task: create(TaskSchema, { id: taskId, status: TaskStatus.COMPLETED }) };
        },
      },
      events: {
        // A stream that, like the tasks service's, stays open after the event.
        async *streamEvents(_request: unknown, options: { signal?: AbortSignal }) {
          streamSignal = options.signal;
          yield { event: settledEvent };
          await new Promise<void>(() => {});
        },
      },
    } as unknown as TasksPort;
    const handler = createChatHandler({ port, config: loadChatConfig({}) });
    const client = new AbortController();
    const context = directCallContext(ChatService.method.sendStreaming, client.signal);
    const request = {
      sessionId: "ses_s",
      message: chatToMessage({ role: "user", content: "hi" }),
    } as SendStreamingRequest;
    const stream = handler.sendStreaming?.(request, context) as AsyncGenerator<{
      kind?: { case?: string };
    }>;
    const first = await stream.next();
    expect(first.value?.kind?.case).toBe("outcome");
    // The caller has its outcome and never asks for more.
    expect(streamSignal?.aborted).toBe(true);
  });
});
