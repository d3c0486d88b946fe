#!/usr/bin/env python3
"""Submit a task with its own requirements and read a refusal's typed reasons.

A task may narrow its agent's routing requirements (SubmitTaskRequest
.requirements). When no backend the agent allows can meet them, SubmitTask
fails FAILED_PRECONDITION and stores nothing; the error carries, next to a
trellis.core.v1.ErrorDetail, a trellis.core.v1.BlockingReasons: which
backend refused, over which capability, with which reason code. Both travel
in the `grpc-status-details-bin` trailer, which decodes into the generated
trellis.core.v1.RpcStatus (google.rpc.Status's wire form) — no googleapis
package needed.

    python3 clients/python/examples/typed_refusal.py --agent-id agt_... \\
        --require approval_interrupts

Prints one JSON line: the task when it was accepted, else the refusal
(code, reason, blocking reasons). Exit 0 either way; 1 when the call failed
without typed details; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gen"))

import grpc  # noqa: E402

from connection import add_server_arguments, open_channel, read_api_key  # noqa: E402

from trellis.adapters.v1 import execution_pb2 as ex  # noqa: E402
from trellis.core.v1 import error_pb2, message_pb2  # noqa: E402
from trellis.tasks.v1 import services_pb2, services_pb2_grpc  # noqa: E402

# The requirements a task may ask for here, each at REQUIRED.
REQUIRABLE = ("tool_use", "approval_interrupts", "attachments", "continuation_support")


def typed_details(error: grpc.RpcError) -> tuple[error_pb2.ErrorDetail | None,
                                                  error_pb2.BlockingReasons | None]:
    """The ErrorDetail and BlockingReasons of a gRPC error, when it has them."""
    detail = blocking = None
    for key, value in error.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = error_pb2.RpcStatus.FromString(value)
        for packed in status.details:
            if packed.Is(error_pb2.ErrorDetail.DESCRIPTOR):
                detail = error_pb2.ErrorDetail()
                packed.Unpack(detail)
            elif packed.Is(error_pb2.BlockingReasons.DESCRIPTOR):
                blocking = error_pb2.BlockingReasons()
                packed.Unpack(blocking)
    return detail, blocking


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_arguments(parser)
    parser.add_argument("--agent-id", required=True)
    parser.add_argument("--require", action="append", choices=REQUIRABLE, default=[])
    parser.add_argument("--text", default="hello")
    args = parser.parse_args(argv)
    key = read_api_key(args, "typed_refusal")
    channel = open_channel(args.url, "typed_refusal")
    tasks = services_pb2_grpc.TaskServiceStub(channel)
    requirements = ex.ExecutionRequirements(
        **{name: ex.REQUIREMENT_REQUIRED for name in args.require}
    )
    request = services_pb2.SubmitTaskRequest(
        session_id=f"ses_py_refusal_{uuid.uuid4().hex[:12]}",
        create_session=True,
        agent_id=args.agent_id,
        input=message_pb2.Message(
            role=message_pb2.ROLE_USER,
            parts=[message_pb2.Part(text=message_pb2.TextPart(text=args.text))],
        ),
        requirements=requirements,
    )
    try:
        answer = tasks.SubmitTask(
            request, metadata=[("authorization", f"Bearer {key}")], timeout=30
        )
    except grpc.RpcError as error:
        detail, blocking = typed_details(error)
        if detail is None:
            print(f"typed_refusal: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1
        print(json.dumps({
            "refused": True,
            "code": error.code().name,
            "reason": detail.reason,
            "param": detail.param,
            "category": blocking.category if blocking else "",
            "omitted": blocking.omitted if blocking else 0,
            "blocking": [
                {
                    "backend_id": r.backend_id,
                    "capability": r.capability,
                    "code": r.code,
                    "severity": r.severity,
                }
                for r in (blocking.reasons if blocking else [])
            ],
        }), flush=True)
        return 0
    print(json.dumps({"refused": False, "task_id": answer.task.id}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
