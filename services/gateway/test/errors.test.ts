import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { BlockingReasonsSchema, ErrorDetailSchema } from "@trellis/contracts/core";
import { TrellisError, toConnectError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { harnErrorCodes, toHarnError } from "../src/domain/errors.js";

describe("error envelope", () => {
  it("keeps the spec's key order and fields", () => {
    const { status, body } = toHarnError(
      new TrellisError({ reason: "invalid_request", message: "bad", param: "input" }),
      "req_1",
    );
    expect(status).toBe(400);
    expect(Object.keys(body.error)).toEqual([
      "code",
      "message",
      "type",
      "param",
      "request_id",
      "details",
    ]);
    expect(body.error).toEqual({
      code: "invalid_request",
      message: "bad",
      type: "request_error",
      param: "input",
      request_id: "req_1",
      details: {},
    });
  });

  it("maps every Harn code to the spec's status", () => {
    expect(harnErrorCodes.unsupported_protocol_version.status).toBe(426);
    expect(harnErrorCodes.idempotency_key_reused).toEqual({ status: 409, type: "conflict_error" });
    expect(harnErrorCodes.cursor_expired.status).toBe(410);
    expect(harnErrorCodes.client_closed_request.status).toBe(499);
    expect(harnErrorCodes.upstream_unavailable).toEqual({ status: 502, type: "upstream_error" });
  });

  it("passes Harn reasons of internal services through", () => {
    const error = toConnectError(
      new TrellisError({
        reason: "invalid_state_transition",
        message: "a task cannot go from COMPLETED to WORKING",
        domain: "tasks.trellis.dev",
        metadata: { to: "WORKING", from: "COMPLETED" },
      }),
    );
    const { status, body } = toHarnError(error, "r");
    expect(status).toBe(400);
    expect(body.error.code).toBe("invalid_state_transition");
    expect(body.error.message).toBe("a task cannot go from COMPLETED to WORKING");
    expect(body.error.details).toEqual({
      domain: "tasks.trellis.dev",
      metadata: { from: "COMPLETED", to: "WORKING" },
    });
  });

  it("folds domain reasons into their family and keeps them in details", () => {
    const error = toConnectError(
      new TrellisError({
        reason: "agent_definition_invalid",
        message: "no entry",
        param: "agent.definition",
      }),
    );
    const { status, body } = toHarnError(error, "r");
    expect(status).toBe(400);
    expect(body.error).toMatchObject({
      code: "invalid_request",
      param: "agent.definition",
      details: { reason: "agent_definition_invalid" },
    });
  });

  it("uses the Connect code without a detail, and hides internal messages", () => {
    expect(toHarnError(new ConnectError("gone", Code.NotFound), "r").status).toBe(404);
    expect(toHarnError(new ConnectError("busy", Code.Aborted), "r").body.error.code).toBe(
      "conflict",
    );
    expect(toHarnError(new ConnectError("down", Code.Unavailable), "r").status).toBe(503);
    const internal = toHarnError(
      new ConnectError("SELECT * FROM secrets failed", Code.Internal),
      "req_9",
    );
    expect(internal.status).toBe(500);
    expect(internal.body.error.message).toBe("internal error (request id req_9)");
    const unknown = toHarnError(new Error("pg: connection to 10.0.0.1 refused"), "req_9");
    expect(unknown.body.error.message).not.toContain("10.0.0.1");
  });

  it("reads an ErrorDetail attached by hand", () => {
    const detail = create(ErrorDetailSchema, {
      reason: "cursor_expired",
      domain: "tasks.trellis.dev",
    });
    const error = new ConnectError("too old", Code.OutOfRange, undefined, [
      { desc: ErrorDetailSchema, value: detail },
    ]);
    expect(toHarnError(error, "r")).toMatchObject({
      status: 410,
      body: { error: { code: "cursor_expired" } },
    });
  });

  it("puts typed blocking reasons (a BlockingReasons detail) in details.blocking", () => {
    const detail = create(ErrorDetailSchema, {
      reason: "agent_blocked",
      domain: "tasks.trellis.dev",
      param: "requirements",
    });
    const blocking = create(BlockingReasonsSchema, {
      category: "unsupported",
      retryable: false,
      omitted: 3,
      reasons: [
        {
          backendId: "plain",
          capability: "approval_interrupts",
          code: "approval_interrupt_unsupported",
          severity: "blocking",
          message: "plain cannot pause for approvals",
        },
      ],
    });
    const error = new ConnectError("no backend", Code.FailedPrecondition, undefined, [
      { desc: ErrorDetailSchema, value: detail },
      { desc: BlockingReasonsSchema, value: blocking },
    ]);
    // Through the wire form (the gateway reads it from a tasks call).
    const relayed = errorFromJsonBytes(
      errorToJsonBytes(error, {}),
      undefined,
      new ConnectError("unreadable", Code.Internal),
    );
    const { status, body } = toHarnError(relayed, "r");
    expect(status).toBe(409);
    expect(body.error.param).toBe("requirements");
    expect(body.error.details).toEqual({
      reason: "agent_blocked",
      domain: "tasks.trellis.dev",
      blocking: {
        category: "unsupported",
        retryable: false,
        omitted: 3,
        reasons: [
          {
            backend_id: "plain",
            capability: "approval_interrupts",
            code: "approval_interrupt_unsupported",
            severity: "blocking",
            message: "plain cannot pause for approvals",
          },
        ],
      },
    });
  });
});
