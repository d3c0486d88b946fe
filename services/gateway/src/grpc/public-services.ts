/**
 * The RPC services the gateway exposes to the outside (and forwards in
 * distributed mode). Add a service here when its area becomes public.
 */
import type { DescService } from "@bufbuild/protobuf";
import {
  AdapterRegistryService,
  RoutingService,
  VaultService,
  WorkerService,
} from "@trellis/contracts/adapters";
import { ChatService } from "@trellis/contracts/chat";
import { ReceiptService } from "@trellis/contracts/receipts";
import {
  AgentService,
  ArtifactService,
  BranchService,
  ConnectorService,
  EventService,
  MemoryService,
  OutcomeService,
  SessionService,
  SignalService,
  SkillService,
  TaskService,
  WorkspaceService,
} from "@trellis/contracts/tasks";

/** Public RPC services, forwarded by the gateway in distributed mode. */
export const publicServices: readonly DescService[] = [
  WorkspaceService,
  AgentService,
  SessionService,
  TaskService,
  EventService,
  SignalService,
  ArtifactService,
  OutcomeService,
  ChatService,
  ReceiptService,
  VaultService,
  BranchService,
  ConnectorService,
  MemoryService,
  SkillService,
  WorkerService,
  // Only ListBackends and Negotiate pass the gateway (admin); the rest are internal.
  AdapterRegistryService,
  RoutingService,
];
