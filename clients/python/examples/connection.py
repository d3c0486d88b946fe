"""What the examples share: where Trellis is and the key to call it with.

    parser = argparse.ArgumentParser(...)
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    key = read_api_key(args, "my_example")
    channel = open_channel(args.url, "my_example")

A missing key or a URL that is not http(s)://host:port prints why (prefixed
with the example's name) and exits 2, as a bad argument does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

import grpc


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """--url, --api-key and --api-key-file, defaulting from the environment."""
    parser.add_argument("--url", default=os.environ.get("TRELLIS_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--api-key", default=os.environ.get("TRELLIS_API_KEY"))
    parser.add_argument(
        "--api-key-file",
        default=os.environ.get("TRELLIS_API_KEY_FILE", ".trellis/data/admin-api-key"),
    )


def read_api_key(args: argparse.Namespace, prog: str) -> str:
    """--api-key, else the first line of --api-key-file; exits 2 when neither gives one."""
    if args.api_key:
        return args.api_key
    try:
        return Path(args.api_key_file).read_text(encoding="utf-8").strip()
    except OSError as error:
        print(f"{prog}: no API key ({error})", file=sys.stderr)
        raise SystemExit(2) from None


def open_channel(url: str, prog: str) -> grpc.Channel:
    """A gRPC channel to `url`: TLS for https, cleartext HTTP/2 (h2c) for http."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        print(f"{prog}: --url must be http(s)://host:port, got {url!r}", file=sys.stderr)
        raise SystemExit(2)
    target = f"{parsed.hostname}:{parsed.port or (443 if parsed.scheme == 'https' else 80)}"
    if parsed.scheme == "https":
        return grpc.secure_channel(target, grpc.ssl_channel_credentials())
    return grpc.insecure_channel(target)
