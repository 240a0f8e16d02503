#!/usr/bin/env bash
# Builds bench/ceiling (the raw-ceiling client of bench/side_by_side.py, client-go) into a cache
# outside the repository, keyed by its source:
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/ceiling/<hash>/ceiling
#
# Usage: build-ceiling.sh            build if missing, print the binary's path
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ceiling"
# shellcheck source=../hack/cluster/go-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/../hack/cluster/go-tool.sh"
KEY="$(cat "$HERE/go.mod" "$HERE/go.sum" "$HERE/main.go" | sha256sum | cut -c1-16)"
BIN="$GO_TOOL_CACHE_ROOT/ceiling/$KEY"

if ! go_tool_begin ceiling "$BIN"; then
    echo "$BIN/ceiling"
    exit 0
fi
OUT="$(mktemp -d "$BIN/tmp.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
(cd "$HERE" && nice go build -ldflags="-s -w" -o "$OUT/ceiling" .)
mv -f "$OUT/ceiling" "$BIN/ceiling"
echo "$BIN/ceiling"
