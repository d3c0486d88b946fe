/**
 * Receipt policy (Harn v1 "Persona": `receipt_policy` is `required`,
 * `optional` or `disabled`; servers enforce it on every task).
 *
 * Trellis' rule, in order:
 * 1. a workspace whose `metadata.receipt_policy` is `"required"` requires a
 *    receipt for every task, whatever its agent says (compliance floor);
 * 2. otherwise the agent's `receipt_policy`, when it has one;
 * 3. otherwise the workspace's `metadata.receipt_policy`, when it has one;
 * 4. otherwise `required`.
 *
 * `required` and `optional` both issue a receipt: an optional receipt is one
 * the agent does not demand, and Trellis issues it anyway (a receipt is
 * cheap and an audit trail with holes proves little). `disabled` issues none.
 *
 * Pure: no I/O.
 */
import { ReceiptPolicy } from "@trellis/contracts/tasks";

/** A receipt policy by its wire name. */
export type ReceiptPolicyName = "required" | "optional" | "disabled";

/** The wire name of a proto policy; undefined when unspecified. */
export function policyName(policy: ReceiptPolicy): ReceiptPolicyName | undefined {
  switch (policy) {
    case ReceiptPolicy.REQUIRED:
      return "required";
    case ReceiptPolicy.OPTIONAL:
      return "optional";
    case ReceiptPolicy.DISABLED:
      return "disabled";
    default:
      return undefined;
  }
}

/** A policy name from free-form metadata; undefined when absent or unknown. */
export function parsePolicyName(value: unknown): ReceiptPolicyName | undefined {
  return value === "required" || value === "optional" || value === "disabled" ? value : undefined;
}

/** The policy that applies to a task (see the module comment). */
export function effectivePolicy(
  agent: ReceiptPolicyName | undefined,
  workspace: ReceiptPolicyName | undefined,
): ReceiptPolicyName {
  if (workspace === "required") return "required";
  return agent ?? workspace ?? "required";
}
