import { TaskStatus } from "@trellis/contracts/core";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import {
  cancelEndReason,
  cancelRequested,
  canTransition,
  isSuspended,
  isTerminal,
  taskEventKind,
  transition,
} from "../../src/domain/lifecycle.js";

const S = TaskStatus;
const ALL = [
  S.UNSPECIFIED,
  S.SUBMITTED,
  S.WORKING,
  S.INPUT_REQUIRED,
  S.AUTH_REQUIRED,
  S.COMPLETED,
  S.FAILED,
  S.CANCELED,
];

// The Harn Agents Protocol v1 table, verbatim.
const TABLE: Record<number, TaskStatus[]> = {
  [S.SUBMITTED]: [S.WORKING, S.CANCELED, S.FAILED],
  [S.WORKING]: [S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.COMPLETED, S.FAILED, S.CANCELED],
  [S.INPUT_REQUIRED]: [S.WORKING, S.FAILED, S.CANCELED],
  [S.AUTH_REQUIRED]: [S.WORKING, S.FAILED, S.CANCELED],
  [S.COMPLETED]: [],
  [S.FAILED]: [],
  [S.CANCELED]: [],
  [S.UNSPECIFIED]: [],
};

describe("task lifecycle", () => {
  for (const from of ALL) {
    for (const to of ALL) {
      const allowed = TABLE[from]?.includes(to) ?? false;
      it(`${S[from]} → ${S[to]} is ${allowed ? "allowed" : "refused"}`, () => {
        expect(canTransition(from, to)).toBe(allowed);
        if (allowed) {
          expect(transition(from, to)).toBe(to);
        } else {
          let error: unknown;
          try {
            transition(from, to, "task_1");
          } catch (e) {
            error = e;
          }
          expect(isTrellisError(error)).toBe(true);
          expect(error).toMatchObject({
            reason: "invalid_state_transition",
            metadata: { from: S[from], to: S[to], task_id: "task_1" },
          });
        }
      });
    }
  }

  it("nothing leaves a terminal state, so CANCELED is never replaced", () => {
    for (const terminal of [S.COMPLETED, S.FAILED, S.CANCELED]) {
      expect(isTerminal(terminal)).toBe(true);
      for (const to of ALL) expect(canTransition(terminal, to)).toBe(false);
    }
    expect(isTerminal(S.WORKING)).toBe(false);
  });

  it("knows the suspended states", () => {
    expect(ALL.filter(isSuspended)).toEqual([S.INPUT_REQUIRED, S.AUTH_REQUIRED]);
  });

  it("names the event of each state with the Harn event names", () => {
    expect(ALL.slice(1).map(taskEventKind)).toEqual([
      "task.submitted",
      "task.started",
      "task.input_required",
      "task.auth_required",
      "task.completed",
      "task.failed",
      "task.canceled",
    ]);
  });
});

describe("two-step cancel of a running task", () => {
  it("is requested while canceled_at is set on a task that is not terminal", () => {
    const at = new Date();
    expect(cancelRequested({ status: TaskStatus.WORKING, canceled_at: at })).toBe(true);
    expect(cancelRequested({ status: TaskStatus.WORKING, canceled_at: null })).toBe(false);
    expect(cancelRequested({ status: TaskStatus.CANCELED, canceled_at: at })).toBe(false);
  });

  it("says why it was requested and whether the backend confirmed the stop", () => {
    expect(cancelEndReason("enough", true)).toBe("enough (the backend confirmed it stopped)");
    expect(cancelEndReason("", false)).toBe(
      "canceled (the backend did not confirm it stopped: the cancel grace period ran out)",
    );
    expect(cancelEndReason("stop", false, "worker lost")).toBe(
      "stop (the backend did not confirm it stopped: worker lost)",
    );
  });
});
