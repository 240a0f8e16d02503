#!/usr/bin/env bash
# Builds bench/ceiling (the raw-ceiling client of bench/side_by_side.py, client-go) into a cache
# outside the repository, keyed by its source:
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/ceiling/<hash>/ceiling
#
# Usage: build-ceiling.sh            build if missing, print the binary's path
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ceiling"
CACHE_ROOT="${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}"
KEY="$(cat "$HERE/go.mod" "$HERE/go.sum" "$HERE/main.go" | sha256sum | cut -c1-16)"
BIN="$CACHE_ROOT/ceiling/$KEY"

if [ -x "$BIN/ceiling" ]; then
    echo "$BIN/ceiling"
    exit 0
fi
command -v go >/dev/null 2>&1 || {
    echo "build-ceiling.sh: the go command is required" >&2
    exit 1
}
mkdir -p "$BIN"
export GOCACHE="${MPI_OPERATOR_GOCACHE:-$CACHE_ROOT/go-build}"
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="-trimpath -buildvcs=false"
OUT="$(mktemp -d "$BIN/tmp.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
(cd "$HERE" && nice go build -ldflags="-s -w" -o "$OUT/ceiling" .)
mv -f "$OUT/ceiling" "$BIN/ceiling"
echo "$BIN/ceiling"
