/**
 * Clients of a running tasks service, and the calls the tests (the tasks
 * service's and others') make through them: a text message, an agent, a
 * watch until a task settles.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import { type Message, MessageSchema, Role, TaskStatus } from "@trellis/contracts/core";
import {
  AgentService,
  ArtifactService,
  EventService,
  OutcomeService,
  SessionService,
  SignalService,
  type Task,
  TaskService,
  WorkspaceService,
} from "@trellis/contracts/tasks";
import { type ClientsOf, createClients } from "@trellis/runtime";

/** Every tasks RPC service, by the name its client goes under in {@link TasksClients}. */
const TASKS_SERVICES = {
  workspaces: WorkspaceService,
  agents: AgentService,
  sessions: SessionService,
  tasks: TaskService,
  events: EventService,
  signals: SignalService,
  artifacts: ArtifactService,
  outcomes: OutcomeService,
};

/** Clients of every tasks RPC service over one transport. */
export type TasksClients = ClientsOf<typeof TASKS_SERVICES>;

/** Clients of every tasks RPC service over `transport`. */
export function clientsOf(transport: Transport): TasksClients {
  return createClients(transport, TASKS_SERVICES);
}

/** A one-text-part message. */
export function text(value: string, role: Role = Role.USER): Message {
  return create(MessageSchema, {
    role,
    parts: [{ kind: { case: "text", value: { text: value } } }],
  });
}

/** Create an agent and return its id. */
export async function createAgent(
  clients: TasksClients,
  name: string,
  backend: string,
  definition: JsonObject,
  extra: { workspaceId?: string; safeToRetry?: boolean } = {},
): Promise<string> {
  const { agent } = await clients.agents.createAgent({
    agent: {
      name,
      backend,
      definition,
      workspaceId: extra.workspaceId ?? "",
      safeToRetry: extra.safeToRetry ?? false,
    },
  });
  return agent?.id as string;
}

/** Watch a task until `until` holds (or the stream ends); returns every status seen. */
export async function watchUntil(
  clients: TasksClients,
  taskId: string,
  until: (task: Task) => boolean = (t) =>
    t.status === TaskStatus.COMPLETED ||
    t.status === TaskStatus.FAILED ||
    t.status === TaskStatus.CANCELED,
  options: { untilSettled?: boolean; timeoutMs?: number } = {},
): Promise<{ task: Task; seen: TaskStatus[] }> {
  const seen: TaskStatus[] = [];
  let last: Task | undefined;
  const signal = AbortSignal.timeout(options.timeoutMs ?? 20_000);
  for await (const response of clients.tasks.watchTask(
    { taskId, untilSettled: options.untilSettled ?? false },
    { signal },
  )) {
    const task = response.task as Task;
    last = task;
    if (seen.at(-1) !== task.status) seen.push(task.status);
    if (until(task)) break;
  }
  if (!last) throw new Error(`no update for ${taskId}`);
  return { task: last, seen };
}
