#!/usr/bin/env python3
"""A Trellis agent backend in Python, over plain gRPC (WorkerService).

A truthful backend: it declares what it can do (stream text, no tools, no
attachments, no approvals, no resume) and refuses, in its own negotiation,
any offer that needs what it cannot do. Its turn replies "echo: <input>",
streamed word by word (`--word-delay` seconds apart, so a turn can be
canceled mid-way). It needs only the generated stubs in ../gen and Debian's
python3-grpcio and python3-protobuf.

The protocol (proto/trellis/adapters/v1/worker_service.proto):
ConnectWorker registers and opens the command stream (connected, then offer /
cancel commands); WorkerHeartbeat keeps the lease; ClaimWork answers an offer
with the worker's negotiation; ReportWorkEvents streams progress;
CompleteWork returns the result with the progress not reported yet (trailing
events); DisconnectWorker leaves.

    python3 clients/python/examples/echo_worker.py --backend py-echo

Configuration: --url / TRELLIS_URL (default http://127.0.0.1:8080),
--api-key / TRELLIS_API_KEY or --api-key-file / TRELLIS_API_KEY_FILE (an
admin key: a worker serves every workspace), --backend, --worker-id,
--capacity, --word-delay. Each step is printed as one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gen"))

import grpc  # noqa: E402

from connection import add_server_arguments, open_channel, read_api_key  # noqa: E402

from trellis.adapters.v1 import execution_pb2 as ex  # noqa: E402
from trellis.adapters.v1 import routing_pb2, worker_service_pb2 as ws  # noqa: E402
from trellis.adapters.v1 import worker_service_pb2_grpc as ws_grpc  # noqa: E402
from trellis.core.v1 import message_pb2  # noqa: E402

REQUIRED = ex.REQUIREMENT_REQUIRED
# Events one ReportWorkEvents / CompleteWork call may carry.
MAX_EVENTS_PER_CALL = 256

# What this backend can honestly do.
CAPABILITIES = ex.ExecutionCapabilities(
    schema_version=1,
    tool_use=ex.TOOL_USE_SUPPORT_NONE,
    structured_tool_calls=False,
    continuation_support=ex.CONTINUATION_SUPPORT_NONE,
    approval_interrupts=ex.APPROVAL_INTERRUPTS_NONE,
    trace_depth=ex.TRACE_DEPTH_MINIMAL,
    attachments=False,
    streaming=ex.STREAMING_SUPPORT_NATIVE,
    max_context_strategy=ex.CONTEXT_STRATEGY_SMALL,
    notes=["echo worker (Python, gRPC): repeats the input, streamed word by word"],
)


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def negotiate(request: ex.ExecutionRequest) -> ex.ExecutionNegotiation:
    """This worker's own answer to "can you run this honestly?"."""
    reasons = []

    def block(code: int, message: str) -> None:
        reasons.append(
            ex.NegotiationReason(code=code, message=message, severity=ex.SEVERITY_BLOCKING)
        )

    req = request.requirements
    if req.tool_use == REQUIRED:
        block(ex.REASON_CODE_TOOL_USE_UNSUPPORTED, "this worker runs no tools")
    if req.structured_tool_calls == REQUIRED:
        block(ex.REASON_CODE_STRUCTURED_TOOL_CALLS_UNSUPPORTED, "no structured tool calls")
    if req.approval_interrupts == REQUIRED:
        block(ex.REASON_CODE_APPROVAL_INTERRUPT_UNSUPPORTED, "this worker cannot pause for approval")
    if req.continuation_support == REQUIRED or request.HasField("resume"):
        block(ex.REASON_CODE_CONTINUATION_UNSUPPORTED, "this worker cannot resume a suspended turn")
    attachments = [p for p in request.input.parts if not p.HasField("text")]
    if req.attachments == REQUIRED or attachments:
        block(ex.REASON_CODE_ATTACHMENTS_UNSUPPORTED, "this worker reads text only")
    if request.schema_version > CAPABILITIES.schema_version:
        block(ex.REASON_CODE_SCHEMA_VERSION_UNSUPPORTED, f"schema {request.schema_version} is newer")
    warnings = []
    if req.trace_depth > CAPABILITIES.trace_depth:
        warnings.append(
            ex.NegotiationReason(
                code=ex.REASON_CODE_TRACE_DEPTH_REDUCED,
                message="only a minimal trace is kept",
                severity=ex.SEVERITY_WARNING,
            )
        )
    return ex.ExecutionNegotiation(
        supported=not reasons,
        degraded=bool(warnings),
        reasons=reasons + warnings,
        effective_capabilities=CAPABILITIES,
    )


def text_of(message: message_pb2.Message) -> str:
    return "".join(part.text.text for part in message.parts if part.HasField("text"))


class Worker:
    def __init__(self, stub: ws_grpc.WorkerServiceStub, metadata, args):
        self.stub = stub
        self.metadata = metadata
        self.args = args
        self.worker_id = ""
        self.session = ""
        self.running: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def ref(self, offer: ws.WorkOffer) -> ws.WorkRef:
        return ws.WorkRef(
            worker_id=self.worker_id,
            session=self.session,
            execution_id=offer.execution_id,
            attempt=offer.attempt,
        )

    def heartbeats(self, interval_s: float, session: str) -> None:
        while not self.stopped.wait(interval_s) and session == self.session:
            with self.lock:
                in_flight = len(self.running)
            try:
                self.stub.WorkerHeartbeat(
                    ws.WorkerHeartbeatRequest(
                        worker_id=self.worker_id, session=self.session, in_flight=in_flight
                    ),
                    metadata=self.metadata,
                    timeout=5,
                )
            except grpc.RpcError as error:
                emit(step="heartbeat_failed", code=error.code().name, detail=error.details())
                if error.code() == grpc.StatusCode.NOT_FOUND:
                    # The lease is gone; the command stream ends too, and
                    # serve() connects again.
                    return

    def run_turn(self, offer: ws.WorkOffer, cancel: threading.Event) -> None:
        """Run one turn. Progress is batched: deltas are reported only before
        the worker waits (so the client sees them while it does) or when 256
        have piled up; the rest ride on CompleteWork as trailing events, so a
        turn with no waits is one ClaimWork and one CompleteWork."""
        ref = self.ref(offer)
        words = ("echo: " + text_of(offer.request.input)).split(" ")
        reply = ""
        outcome = "completed"
        pending: list[ex.ExecutionEvent] = []
        reports = 0

        def flush() -> bool:
            nonlocal pending, reports
            if not pending:
                return True
            answer = self.stub.ReportWorkEvents(
                ws.ReportWorkEventsRequest(work=ref, events=pending),
                metadata=self.metadata,
                timeout=10,
            )
            reports += 1
            pending = []
            return answer.current

        try:
            for index, word in enumerate(words):
                delay = self.args.word_delay if index else 0
                # About to wait: what the client has not seen yet goes out first.
                if (delay > 0 or len(pending) >= MAX_EVENTS_PER_CALL) and not flush():
                    emit(step="stale", execution_id=offer.execution_id)
                    return
                if cancel.wait(delay) if delay > 0 else cancel.is_set():
                    outcome = "cancelled"
                    break
                chunk = word if index == 0 else " " + word
                reply += chunk
                pending.append(ex.ExecutionEvent(text_delta=ex.TextDelta(text=chunk)))
            if outcome == "cancelled":
                result = ex.ExecutionResult(schema_version=1, cancelled=ex.ExecutionCancelled())
            else:
                result = ex.ExecutionResult(
                    schema_version=1,
                    completed=ex.ExecutionCompleted(),
                    messages=[
                        message_pb2.Message(
                            role=message_pb2.ROLE_ASSISTANT,
                            parts=[message_pb2.Part(text=message_pb2.TextPart(text=reply))],
                        )
                    ],
                )
            trailing = len(pending)
            done = self.stub.CompleteWork(
                ws.CompleteWorkRequest(work=ref, result=result, events=pending),
                metadata=self.metadata,
                timeout=10,
            )
            emit(step=outcome, execution_id=offer.execution_id, attempt=offer.attempt,
                 accepted=done.accepted, reply=reply, reports=reports,
                 trailing_events=trailing)
        except grpc.RpcError as error:
            emit(step="turn_failed", execution_id=offer.execution_id, code=error.code().name,
                 detail=error.details())
        finally:
            with self.lock:
                self.running.pop(offer.execution_id, None)

    def on_offer(self, offer: ws.WorkOffer) -> None:
        negotiation = negotiate(offer.request)
        emit(step="offer", execution_id=offer.execution_id, attempt=offer.attempt,
             supported=negotiation.supported,
             reasons=[r.message for r in negotiation.reasons])
        answer = self.stub.ClaimWork(
            ws.ClaimWorkRequest(work=self.ref(offer), negotiation=negotiation),
            metadata=self.metadata,
            timeout=10,
        )
        emit(step="claim", execution_id=offer.execution_id, granted=answer.granted,
             reason=answer.reason)
        if not answer.granted or not negotiation.supported:
            return
        cancel = threading.Event()
        with self.lock:
            self.running[offer.execution_id] = cancel
        threading.Thread(target=self.run_turn, args=(offer, cancel), daemon=True).start()

    def serve(self) -> None:
        registration = routing_pb2.WorkerRegistration(
            schema_version=1,
            worker_id=self.args.worker_id or "",
            backend_id=self.args.backend,
            capabilities=CAPABILITIES,
            capacity=self.args.capacity,
            heartbeat_interval_ms=self.args.heartbeat_ms,
        )
        stream = self.stub.ConnectWorker(
            ws.ConnectWorkerRequest(worker=registration), metadata=self.metadata
        )
        self.stream = stream
        for command in stream:
            kind = command.WhichOneof("command")
            if kind == "connected":
                self.worker_id = command.connected.worker_id
                self.session = command.connected.session
                emit(step="connected", worker_id=self.worker_id, backend=self.args.backend,
                     ttl_ms=command.connected.ttl_ms, pid=os.getpid())
                threading.Thread(
                    target=self.heartbeats,
                    args=(self.args.heartbeat_ms / 1000, self.session),
                    daemon=True,
                ).start()
            elif kind == "offer":
                # Claims go out on their own thread: the stream keeps flowing.
                threading.Thread(target=self.on_offer, args=(command.offer,), daemon=True).start()
            elif kind == "cancel":
                emit(step="cancel", execution_id=command.cancel.execution_id,
                     reason=command.cancel.reason)
                with self.lock:
                    event = self.running.get(command.cancel.execution_id)
                if event:
                    event.set()

    def leave(self) -> None:
        self.stopped.set()
        if self.worker_id:
            try:
                self.stub.DisconnectWorker(
                    ws.DisconnectWorkerRequest(worker_id=self.worker_id, session=self.session),
                    metadata=self.metadata,
                    timeout=5,
                )
            except grpc.RpcError:
                pass


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_arguments(parser)
    parser.add_argument("--backend", default="py-echo")
    parser.add_argument("--worker-id", default="")
    parser.add_argument("--capacity", type=int, default=2)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--word-delay", type=float, default=0.05)
    args = parser.parse_args(argv)
    key = read_api_key(args, "echo_worker")
    channel = open_channel(args.url, "echo_worker")
    worker = Worker(ws_grpc.WorkerServiceStub(channel), [("authorization", f"Bearer {key}")], args)

    def stop(_signum, _frame):
        worker.leave()
        worker.stream.cancel()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # A lost lease (the server missed our heartbeats) or a dropped connection
    # ends the command stream: connect again, as a new session.
    while True:
        try:
            worker.serve()
            emit(step="stream_ended")
        except grpc.RpcError as error:
            if worker.stopped.is_set():
                emit(step="left")
                return 0
            if error.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED,
                                grpc.StatusCode.INVALID_ARGUMENT):
                print(f"echo_worker: RPC failed: {error.code().name}: {error.details()}",
                      file=sys.stderr)
                return 1
            emit(step="stream_failed", code=error.code().name, detail=error.details())
        if worker.stopped.is_set():
            return 0
        time.sleep(1)
        emit(step="reconnecting")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
