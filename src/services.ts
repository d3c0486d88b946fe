/** Every Trellis service, in start order (dependencies first). */
import { adaptersService } from "@trellis/adapters";
import { chatService } from "@trellis/chat";
import { gatewayService } from "@trellis/gateway";
import type { ServiceDefinition } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { tasksService } from "@trellis/tasks";

export const allServices: readonly ServiceDefinition[] = [
  tasksService,
  adaptersService,
  chatService,
  receiptsService,
  gatewayService,
];
