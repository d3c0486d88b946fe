#!/usr/bin/env python3
"""A chat turn with an approval, from Python, over plain gRPC.

Against a running Trellis (for instance `npm start`), this script:

1. registers a scripted agent that asks "May I send the email?", suspends
   until it is approved, then says "Email sent."
   (trellis.tasks.v1.AgentService/CreateAgent);
2. sends a user message to a new session (trellis.chat.v1.ChatService/Send)
   and sees the turn come back `suspended`, with the signal to deliver;
3. opens the session's listener (ChatService/Subscribe) and, once it is
   registered, approves (trellis.tasks.v1.SignalService/Deliver);
4. reads the resumed turn's outcome from the listener (`completed`, with the
   post-resume reply only) and the whole transcript (ChatService/GetHistory).

It uses only the generated stubs in ../gen and Debian's python3-grpcio and
python3-protobuf (no PyPI):

    PYTHONPATH=clients/python/gen python3 clients/python/examples/chat_approval.py

Configuration (flags override the environment):

    --url / TRELLIS_URL                 default http://127.0.0.1:8080 (https:// uses TLS)
    --api-key / TRELLIS_API_KEY         the API key (a bearer token)
    --api-key-file / TRELLIS_API_KEY_FILE
                                        a file holding it; default
                                        .trellis/data/admin-api-key, where
                                        `npm start` keeps the admin key
    --connect-timeout / TRELLIS_CONNECT_TIMEOUT
                                        seconds to wait for the server, default 10
    --json                              also print a JSON summary as the last line

Exit status: 0 when the turn completed after the approval; 1 on an RPC error
(its code, message and Trellis ErrorDetail are printed) or an unexpected
outcome; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

# The generated stubs live next to this directory (clients/python/gen).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gen"))

import grpc  # noqa: E402
from google.protobuf import any_pb2, json_format, struct_pb2  # noqa: E402

from trellis.chat.v1 import chat_pb2, chat_pb2_grpc  # noqa: E402
from trellis.core.v1 import error_pb2, message_pb2  # noqa: E402
from trellis.tasks.v1 import resources_pb2, services_pb2, services_pb2_grpc  # noqa: E402

# A scripted graph (backend "scripted"): ask, wait for the "approval" signal,
# then report. The same document the README's buf curl walk-through uses.
APPROVAL_GRAPH = {
    "entry": "ask",
    "nodes": {
        "ask": {"update": {"messages": [{"role": "assistant", "content": "May I send the email?"}]}},
        "wait": {"suspend": {"signal_id": "approval"}},
        "sent": {"update": {"messages": [{"role": "assistant", "content": "Email sent."}]}},
    },
    "edges": [
        {"from": "ask", "to": "wait"},
        {"from": "wait", "to": "sent"},
        {"from": "sent", "to": "END"},
    ],
}

TIMEOUT_S = 30.0


class ExampleError(Exception):
    """The run did not go as a chat turn with approval should."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TRELLIS_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--api-key", default=os.environ.get("TRELLIS_API_KEY"))
    parser.add_argument(
        "--api-key-file",
        default=os.environ.get("TRELLIS_API_KEY_FILE", ".trellis/data/admin-api-key"),
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=float(os.environ.get("TRELLIS_CONNECT_TIMEOUT") or 10),
        help="seconds to wait for the server",
    )
    parser.add_argument("--session", help="session id (default: a new one)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary last")
    return parser.parse_args(argv)


def api_key(args: argparse.Namespace) -> str:
    if args.api_key:
        return args.api_key.strip()
    try:
        return Path(args.api_key_file).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise SystemExit(
            f"chat_approval: no API key: set TRELLIS_API_KEY or point --api-key-file "
            f"at a file holding one ({error})"
        ) from None


def open_channel(url: str) -> grpc.Channel:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise SystemExit(f"chat_approval: --url must be http(s)://host:port, got {url!r}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    target = f"{parsed.hostname}:{port}"
    if parsed.scheme == "https":
        return grpc.secure_channel(target, grpc.ssl_channel_credentials())
    # Trellis serves gRPC over cleartext HTTP/2 (h2c) on its one port.
    return grpc.insecure_channel(target)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def error_details(error: grpc.RpcError) -> list[error_pb2.ErrorDetail]:
    """The trellis.core.v1.ErrorDetail entries of a gRPC error.

    They travel in the `grpc-status-details-bin` trailer, a google.rpc.Status
    (code = 1, message = 2, details = 3: repeated Any). Decoded by hand so the
    example needs no googleapis package.
    """
    details = []
    for key, value in error.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        pos = 0
        while pos < len(value):
            tag, pos = _varint(value, pos)
            field, wire_type = tag >> 3, tag & 7
            if wire_type == 0:
                _, pos = _varint(value, pos)
            elif wire_type == 2:
                length, pos = _varint(value, pos)
                chunk, pos = value[pos : pos + length], pos + length
                if field == 3:
                    packed = any_pb2.Any.FromString(chunk)
                    if packed.Is(error_pb2.ErrorDetail.DESCRIPTOR):
                        detail = error_pb2.ErrorDetail()
                        packed.Unpack(detail)
                        details.append(detail)
            else:
                break  # not a google.rpc.Status we understand
    return details


def text_of(message: message_pb2.Message) -> str:
    return "".join(part.text.text for part in message.parts if part.HasField("text"))


def role_of(message: message_pb2.Message) -> str:
    return message_pb2.Role.Name(message.role).removeprefix("ROLE_").lower()


class Listener:
    """ChatService/Subscribe read on a thread; responses handed over in order."""

    def __init__(self, chat: chat_pb2_grpc.ChatServiceStub, session_id: str, metadata):
        self._call = chat.Subscribe(
            chat_pb2.SubscribeRequest(session_id=session_id), metadata=metadata
        )
        self._items: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for response in self._call:
                self._items.put(response)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                self._items.put(error)

    def next(self, what: str) -> chat_pb2.SubscribeResponse:
        try:
            item = self._items.get(timeout=TIMEOUT_S)
        except queue.Empty:
            raise ExampleError(f"no {what} from Subscribe within {TIMEOUT_S:.0f} s") from None
        if isinstance(item, grpc.RpcError):
            raise item
        return item

    def close(self) -> None:
        self._call.cancel()
        self._thread.join(timeout=5)


def run(args: argparse.Namespace) -> dict:
    metadata = (("authorization", f"Bearer {api_key(args)}"),)
    channel = open_channel(args.url)
    try:
        grpc.channel_ready_future(channel).result(timeout=args.connect_timeout)
    except grpc.FutureTimeoutError:
        raise ExampleError(f"cannot reach Trellis at {args.url}") from None
    agents = services_pb2_grpc.AgentServiceStub(channel)
    signals = services_pb2_grpc.SignalServiceStub(channel)
    chat = chat_pb2_grpc.ChatServiceStub(channel)

    # 1. The agent.
    definition = json_format.ParseDict(APPROVAL_GRAPH, struct_pb2.Struct())
    created = agents.CreateAgent(
        services_pb2.CreateAgentRequest(
            agent=resources_pb2.Agent(
                name="python-approver", backend="scripted", definition=definition
            )
        ),
        metadata=metadata,
        timeout=TIMEOUT_S,
    )
    agent_id = created.agent.id
    print(f"agent: {agent_id}")

    # 2. The turn: it asks, then suspends for the approval.
    session_id = args.session or f"ses_py_{int(time.time() * 1000):x}"
    sent = chat.Send(
        chat_pb2.SendRequest(
            session_id=session_id,
            agent_id=agent_id,
            message=message_pb2.Message(
                role=message_pb2.ROLE_USER,
                parts=[message_pb2.Part(text=message_pb2.TextPart(text="email Bob"))],
            ),
        ),
        metadata=metadata,
        timeout=TIMEOUT_S,
    )
    outcome = sent.outcome
    if outcome.WhichOneof("kind") != "suspended":
        raise ExampleError(f"expected a suspended turn, got {json_format.MessageToJson(outcome)}")
    suspended = outcome.suspended
    signal_id = suspended.signal_descriptor.signal_id
    pending = [text_of(m) for m in suspended.pending_messages]
    print(f"send: suspended task={outcome.task_id} signal={signal_id}")
    for text in pending:
        print(f"  pending: {text}")

    # 3. Listen, then approve. Subscribe's first response says the listener is
    # registered; a signal delivered after that is reported on this stream.
    listener = Listener(chat, session_id, metadata)
    try:
        first = listener.next("subscribed")
        if first.WhichOneof("kind") != "subscribed":
            raise ExampleError(f"Subscribe did not start with subscribed: {first}")
        print(f"subscribe: subscribed session={first.subscribed.session_id}")
        delivered = signals.Deliver(
            services_pb2.DeliverRequest(
                signal_id=signal_id,
                payload=struct_pb2.Value(struct_value=json_format.ParseDict({"approved": True}, struct_pb2.Struct())),
            ),
            metadata=metadata,
            timeout=TIMEOUT_S,
        )
        print(f"deliver: task={delivered.task_id} duplicate={delivered.duplicate}")

        # 4. The resumed turn's outcome.
        resumed = listener.next("outcome").outcome
    finally:
        listener.close()
    kind = resumed.WhichOneof("kind")
    replies = [text_of(m) for m in resumed.completed.replies] if kind == "completed" else []
    print(f"outcome: {kind} task={resumed.task_id}")
    for text in replies:
        print(f"  reply: {text}")
    if kind != "completed":
        raise ExampleError(f"the resumed turn did not complete: {json_format.MessageToJson(resumed)}")

    history = chat.GetHistory(
        chat_pb2.GetHistoryRequest(session_id=session_id), metadata=metadata, timeout=TIMEOUT_S
    )
    transcript = [{"role": role_of(m), "text": text_of(m)} for m in history.messages]
    print("history:")
    for entry in transcript:
        print(f"  {entry['role']}: {entry['text']}")
    channel.close()
    return {
        "agent_id": agent_id,
        "session_id": session_id,
        "task_id": outcome.task_id,
        "signal_id": signal_id,
        "pending": pending,
        "delivered_task_id": delivered.task_id,
        "resumed_task_id": resumed.task_id,
        "outcome": kind,
        "replies": replies,
        "history": transcript,
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        summary = run(args)
    except grpc.RpcError as error:
        print(f"chat_approval: RPC failed: {error.code().name}: {error.details()}", file=sys.stderr)
        for detail in error_details(error):
            print(
                f"  reason={detail.reason} domain={detail.domain} "
                f"metadata={dict(detail.metadata)}",
                file=sys.stderr,
            )
        return 1
    except ExampleError as error:
        print(f"chat_approval: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
