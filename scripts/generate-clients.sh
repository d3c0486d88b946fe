#!/usr/bin/env bash
# Regenerate the Python and Go client stubs from proto/ (`npm run generate:clients`).
#
#   clients/python/gen   protobuf messages (+ .pyi) and grpcio services   buf.gen.python.yaml
#   clients/go/gen       protoc-gen-go messages and protoc-gen-go-grpc    buf.gen.go.yaml
#
# Everything comes from Debian, offline:
#   apt-get install protobuf-compiler protobuf-compiler-grpc \
#     golang-go golang-google-protobuf-dev golang-google-grpc-dev protoc-gen-go-grpc
# protoc-gen-go is not packaged as a binary in bookworm, so it is built once from
# golang-google-protobuf-dev's sources into node_modules/.cache/trellis-clients/bin.
#
# Usage: scripts/generate-clients.sh [python|go]...   (default: both)
#        scripts/generate-clients.sh --tools-only      (only build protoc-gen-go if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/node_modules/.cache/trellis-clients/bin
GOCODE=${GOCODE:-/usr/share/gocode}

missing() {
  echo "generate-clients: $1 not found; install it with: apt-get install $2" >&2
  exit 1
}

# protoc-gen-go on PATH, else build it from Debian's sources (GOPATH mode, no network).
protoc_gen_go() {
  if command -v protoc-gen-go >/dev/null 2>&1; then return; fi
  if [ ! -x "$BIN/protoc-gen-go" ]; then
    command -v go >/dev/null 2>&1 || missing go golang-go
    [ -d "$GOCODE/src/google.golang.org/protobuf/cmd/protoc-gen-go" ] ||
      missing "protoc-gen-go sources" golang-google-protobuf-dev
    mkdir -p "$BIN"
    GO111MODULE=off GOPATH="$GOCODE" GOCACHE="${GOCACHE:-$ROOT/node_modules/.cache/trellis-clients/go-build}" \
      go build -o "$BIN/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
  fi
  export PATH="$BIN:$PATH"
}

generate_python() {
  command -v protoc >/dev/null 2>&1 || missing protoc protobuf-compiler
  command -v grpc_python_plugin >/dev/null 2>&1 || missing grpc_python_plugin protobuf-compiler-grpc
  npx buf generate --template buf.gen.python.yaml
  echo "generate-clients: clients/python/gen"
}

generate_go() {
  protoc_gen_go
  command -v protoc-gen-go-grpc >/dev/null 2>&1 || missing protoc-gen-go-grpc protoc-gen-go-grpc
  npx buf generate --template buf.gen.go.yaml
  echo "generate-clients: clients/go/gen"
}

if [ "${1:-}" = "--tools-only" ]; then
  protoc_gen_go
  exit 0
fi

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(python go)
for target in "${targets[@]}"; do
  case "$target" in
    python) generate_python ;;
    go) generate_go ;;
    *)
      echo "generate-clients: unknown target $target (python, go)" >&2
      exit 2
      ;;
  esac
done
