/**
 * The chat service: the harness-chat surface (Send, SendStreaming, Subscribe,
 * GetHistory) over the tasks service's sessions, tasks, mailbox and signals.
 * Stateless: it stores nothing of its own, so any number of replicas serve
 * the same sessions.
 */
import { ChatService } from "@trellis/contracts/chat";
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";
import { loadChatConfig } from "./config.js";
import { createChatHandler } from "./handlers/chat-handler.js";
import { tasksPortOf } from "./handlers/tasks-port.js";

/** The chat service, runnable embedded or as its own process. */
export const chatService: ServiceDefinition = {
  name: "chat",
  provides: [ChatService],
  defaultPort: DEFAULT_PORTS.chat ?? 0,
  create(context) {
    const config = loadChatConfig(context.env);
    const handler = createChatHandler({
      port: tasksPortOf(context.clients),
      config,
      closing: context.closing,
    });
    return {
      routes(router) {
        router.service(ChatService, handler);
      },
    };
  },
};
