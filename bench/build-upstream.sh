#!/usr/bin/env bash
# Builds upstream's operator (kubeflow/mpi-operator, the Go implementation this project
# replaces) at its v0.8.2 release, for bench/side_by_side.py and the takeover tests, into a
# cache outside the repository keyed by that version:
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/upstream/<version>-<commit>/bin/mpi-operator
#
# The source is the release's Go module from the module proxy (`go mod download
# github.com/kubeflow/mpi-operator@v0.8.2`), built in a copy of it with its own go.mod and
# go.sum (`go install pkg@version` would also ask the proxy for the module's version list,
# which is not always served), with the version stamps upstream's Makefile sets. The proxy's
# v0.8.2 is the tag's commit, named below so `--version` says what this is.
#
# Usage: build-upstream.sh            build if missing, print the binary's path
#        build-upstream.sh --print    print the path without building
set -euo pipefail

UPSTREAM_VERSION=v0.8.2
UPSTREAM_COMMIT=fd6ab218ce3e49b81b6a411614d09c9deb029ae9

# shellcheck source=../hack/cluster/go-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/../hack/cluster/go-tool.sh"
BIN="$GO_TOOL_CACHE_ROOT/upstream/$UPSTREAM_VERSION-${UPSTREAM_COMMIT:0:12}/bin"

if [ "${1:-}" = "--print" ] || ! go_tool_begin mpi-operator "$BIN"; then
    echo "$BIN/mpi-operator"
    exit 0
fi

MODULE_DIR="$(go_module_dir "github.com/kubeflow/mpi-operator@$UPSTREAM_VERSION")"
SRC="$(mktemp -d "$BIN/../tmp.XXXXXX")"
trap 'chmod -R u+w "$SRC"; rm -rf "$SRC"' EXIT
cp -R "$MODULE_DIR/." "$SRC"
chmod -R u+w "$SRC"
printf '%s build-upstream.sh: building mpi-operator %s\n' "$(date -u +%H:%M:%S)" "$UPSTREAM_VERSION" >&2
ldflags="-s -w -X github.com/kubeflow/mpi-operator/pkg/version.GitSHA=$UPSTREAM_COMMIT"
ldflags+=" -X github.com/kubeflow/mpi-operator/pkg/version.Version=$UPSTREAM_VERSION"
(cd "$SRC" && go build -ldflags="$ldflags" -o "$SRC/out/mpi-operator" ./cmd/mpi-operator)
mv -f "$SRC/out/mpi-operator" "$BIN/mpi-operator"
echo "$BIN/mpi-operator"
