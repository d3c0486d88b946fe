import { BusyPolicy } from "@trellis/contracts/tasks";
import { describe, expect, it } from "vitest";
import { decideSubmit, isBusy, recoveryAction } from "../../src/domain/mailbox.js";
import { classifySignal, signalIdFor } from "../../src/domain/signals.js";

describe("mailbox decisions", () => {
  const idle = { queued: 0 };
  const running = { running: { id: "task_1", canceled: false }, queued: 0 };
  const queued = { queued: 2 };

  it("runs at once when the session is free, whatever the policy", () => {
    for (const policy of [
      BusyPolicy.UNSPECIFIED,
      BusyPolicy.ENQUEUE,
      BusyPolicy.REJECT,
      BusyPolicy.INTERRUPT,
    ]) {
      expect(decideSubmit(policy, idle, "ses_1")).toEqual({ runNow: true });
    }
    expect(isBusy(idle)).toBe(false);
  });

  it("queues behind a running or queued turn by default", () => {
    expect(decideSubmit(BusyPolicy.UNSPECIFIED, running, "ses_1")).toEqual({ runNow: false });
    expect(decideSubmit(BusyPolicy.ENQUEUE, queued, "ses_1")).toEqual({ runNow: false });
  });

  it("rejects with conflict when busy and the policy is REJECT", () => {
    expect(() => decideSubmit(BusyPolicy.REJECT, running, "ses_1")).toThrow(
      expect.objectContaining({
        reason: "conflict",
        metadata: { session_id: "ses_1", running_task_id: "task_1" },
      }),
    );
    expect(() => decideSubmit(BusyPolicy.REJECT, queued, "ses_1")).toThrow(
      expect.objectContaining({ reason: "conflict" }),
    );
  });

  it("interrupts the running turn (once) with INTERRUPT", () => {
    expect(decideSubmit(BusyPolicy.INTERRUPT, running, "ses_1")).toEqual({
      runNow: false,
      interrupt: "task_1",
    });
    expect(
      decideSubmit(
        BusyPolicy.INTERRUPT,
        { running: { id: "task_1", canceled: true }, queued: 0 },
        "ses_1",
      ),
    ).toEqual({ runNow: false });
    expect(decideSubmit(BusyPolicy.INTERRUPT, queued, "ses_1")).toEqual({ runNow: false });
  });

  it("recovers a lost run: finalize a canceled one, re-run when safe, else fail", () => {
    expect(recoveryAction({ canceled: true }, true)).toBe("finalize_canceled");
    expect(recoveryAction({ canceled: false }, true)).toBe("requeue");
    expect(recoveryAction({ canceled: false }, false)).toBe("fail");
  });
});

describe("signals", () => {
  it("are addressed as <task_id>:<label>", () => {
    expect(signalIdFor("task_1", "approval")).toBe("task_1:approval");
  });

  it("classify cancel, tool confirmation and input", () => {
    expect(classifySignal({ cancel: true })).toEqual({
      cancel: true,
      eventKind: "user.cancel_requested",
    });
    expect(classifySignal({ approved: false })).toEqual({
      cancel: false,
      eventKind: "user.tool_confirmation",
    });
    expect(classifySignal({ text: "42" })).toEqual({
      cancel: false,
      eventKind: "user.input_submitted",
    });
    expect(classifySignal("plain")).toEqual({ cancel: false, eventKind: "user.input_submitted" });
    expect(classifySignal(undefined)).toEqual({ cancel: false, eventKind: "user.input_submitted" });
  });
});
