/** Every Trellis service, in start order. */
import { adaptersService } from "@trellis/adapters";
import { chatService } from "@trellis/chat";
import { gatewayService } from "@trellis/gateway";
import type { ServiceDefinition } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { tasksService } from "@trellis/tasks";

export const allServices: readonly ServiceDefinition[] = [
  // First: embedded mode tries the services' HTTP handlers in this order, and
  // the gateway must check version, key and scope of every /v1 request before
  // another service's REST handler (receipts) serves it.
  gatewayService,
  tasksService,
  adaptersService,
  chatService,
  receiptsService,
];
