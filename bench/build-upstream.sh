#!/usr/bin/env bash
# Builds upstream's operator (kubeflow/mpi-operator, the Go implementation this project
# replaces) from its source at a pinned commit, for bench/side_by_side.py, into a cache
# outside the repository keyed by that version:
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/upstream/<version>-<commit>/bin/mpi-operator
#
# The source is `git archive` of the commit from a git repository: $UPSTREAM_MPI_OPERATOR_GIT
# (a local clone or bare mirror holding the commit), else a bare clone of GitHub's repository
# kept in the cache. The build is upstream's own module (`go build ./cmd/mpi-operator`, its
# go.mod and go.sum as released), so its dependencies come from the Go module proxy.
# The binary is moved into place only after a successful build.
#
# Usage: build-upstream.sh            build if missing, print the binary's path
#        build-upstream.sh --print    print the path without building
set -euo pipefail

# v0.8.2: the head of release-0.8 ("Prepare v0.8.2").
UPSTREAM_VERSION=v0.8.2
UPSTREAM_COMMIT=b10758da23ce5d9b9efa6f42f7b050dc8605f5f5
UPSTREAM_URL=https://github.com/kubeflow/mpi-operator.git

# shellcheck source=../hack/cluster/go-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/../hack/cluster/go-tool.sh"
CACHE_ROOT="$GO_TOOL_CACHE_ROOT"
KEYDIR="$CACHE_ROOT/upstream/$UPSTREAM_VERSION-${UPSTREAM_COMMIT:0:12}"
BIN="$KEYDIR/bin"

if [ "${1:-}" = "--print" ] || ! go_tool_begin mpi-operator "$BIN"; then
    echo "$BIN/mpi-operator"
    exit 0
fi

log() { printf '%s build-upstream.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

GIT_DIR_SOURCE="${UPSTREAM_MPI_OPERATOR_GIT:-$CACHE_ROOT/upstream/repo.git}"
if ! git -C "$GIT_DIR_SOURCE" cat-file -e "$UPSTREAM_COMMIT^{commit}" 2>/dev/null; then
    if [ -n "${UPSTREAM_MPI_OPERATOR_GIT:-}" ]; then
        echo "build-upstream.sh: $UPSTREAM_MPI_OPERATOR_GIT does not hold $UPSTREAM_COMMIT" >&2
        exit 1
    fi
    log "fetching $UPSTREAM_URL"
    [ -d "$GIT_DIR_SOURCE" ] || git init --quiet --bare "$GIT_DIR_SOURCE"
    git -C "$GIT_DIR_SOURCE" fetch --quiet "$UPSTREAM_URL" release-0.8
fi

SRC="$(mktemp -d "$KEYDIR/tmp.XXXXXX")"
trap 'rm -rf "$SRC"' EXIT
git -C "$GIT_DIR_SOURCE" archive "$UPSTREAM_COMMIT" | tar -x -C "$SRC"
start=$SECONDS
log "building mpi-operator $UPSTREAM_VERSION ($UPSTREAM_COMMIT)"
# The version variables upstream's Makefile sets, so `--version` says what this is.
ldflags="-s -w -X github.com/kubeflow/mpi-operator/pkg/version.GitSHA=$UPSTREAM_COMMIT"
ldflags+=" -X github.com/kubeflow/mpi-operator/pkg/version.Version=$UPSTREAM_VERSION"
(cd "$SRC" && go build -ldflags="$ldflags" -o "$SRC/out/mpi-operator" ./cmd/mpi-operator)
mv -f "$SRC/out/mpi-operator" "$BIN/mpi-operator"
log "built in $((SECONDS - start))s"
echo "$BIN/mpi-operator"
