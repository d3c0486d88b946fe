/**
 * Per-request requirements (`SubmitTaskRequest.requirements`, chat `Send`):
 * a task may narrow its agent's routing requirements, never loosen them.
 * Checked when the submit has resolved the agent, before anything is stored:
 *
 * - a value the field does not take → InvalidArgument naming the field;
 * - a value contradicting the agent's (`forbidden` against `required`) →
 *   InvalidArgument naming the field; a weaker one is ignored;
 * - no backend the agent allows can meet them → FailedPrecondition, reason
 *   `agent_blocked`, with a `trellis.core.v1.BlockingReasons` detail (the
 *   typed reasons) next to the ErrorDetail. Not while an allowed backend
 *   has no live worker: one may join before the turn runs (the turn itself
 *   is refused, with the same typed reasons, if none did).
 *
 * What is stored with the task is the narrowed set, so a retried or
 * recovered turn runs under the same requirements.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ExecutionRequirements as PbRequirements } from "@trellis/contracts/adapters";
import { BlockingReasonsSchema, ErrorDetailSchema, type Message } from "@trellis/contracts/core";
import type { Agent } from "@trellis/contracts/tasks";
import {
  type AgentExecutor,
  type ExecutionRequirements,
  narrowRequirements,
  requirementProblems,
  requirementsFromProto,
  routingFromDefinition,
} from "@trellis/execution";
import { blockingReasons } from "../domain/blocking.js";
import { ERROR_DOMAIN, invalidRequest } from "../domain/errors.js";
import { approvalPolicy } from "../worker/turn-runner.js";

/** camelCase requirement field → the proto's snake_case name. */
const snake = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Where the task is going, for a dry-run negotiation. */
export interface RequirementsTarget {
  sessionId: string;
  workspaceId: string;
  input: Message;
}

/**
 * The store's `prepareRequirements` for a submit asking `requested`, or
 * undefined when it asks none. Throws at once for a malformed request.
 */
export function requirementsCheck(
  executor: AgentExecutor,
  requested: PbRequirements | undefined,
  target: RequirementsTarget,
): ((agent: Agent) => ExecutionRequirements | undefined) | undefined {
  const asked = requirementsFromProto(requested, "requirements");
  if (!asked || Object.keys(asked).length === 0) return undefined;
  const [problem] = requirementProblems(asked);
  if (problem) {
    throw invalidRequest(
      `requirements.${snake(problem.field)}: ${problem.message}`,
      `requirements.${snake(problem.field)}`,
    );
  }
  return (agent) => {
    const definition = agent.definition ?? {};
    const { policy } = routingFromDefinition(definition);
    const { requirements, conflicts } = narrowRequirements(policy?.requirements ?? {}, asked);
    const [conflict] = conflicts;
    if (conflict) {
      throw invalidRequest(
        `requirements.${snake(conflict.field)}: ${conflict.message}`,
        `requirements.${snake(conflict.field)}`,
      );
    }
    const refusal = executor.preflight?.({
      taskId: "",
      sessionId: target.sessionId,
      workspaceId: agent.workspaceId || target.workspaceId,
      agent: { id: agent.id, backend: agent.backend, definition, tools: agent.tools },
      history: [],
      input: target.input,
      requirements,
      ...approvalPolicy(agent),
      signal: new AbortController().signal,
    });
    if (refusal?.status === "failed") {
      const blocking = blockingReasons(refusal.reasons, refusal.category, refusal.retryable);
      throw new ConnectError(
        refusal.message.length > 1024 ? `${refusal.message.slice(0, 1021)}...` : refusal.message,
        Code.FailedPrecondition,
        undefined,
        [
          {
            desc: ErrorDetailSchema,
            value: create(ErrorDetailSchema, {
              reason: "agent_blocked",
              domain: ERROR_DOMAIN,
              metadata: { category: refusal.category, agent_id: agent.id },
              param: "requirements",
            }),
          },
          ...(blocking ? [{ desc: BlockingReasonsSchema, value: blocking }] : []),
        ],
      );
    }
    return requirements;
  };
}
