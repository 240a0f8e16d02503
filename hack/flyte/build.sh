#!/usr/bin/env bash
# Builds what the Flyte tests run, into a cache outside the repository:
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/flyte/
#       flyteplugins-<version>-<hash>/   the directory this script prints
#           bin/flyte-mpi   Flyte's MPI plugin (flyteplugins' BuildResource and GetTaskPhase)
#                           behind a small command line (main.go beside this file)
#           venv ->         ../flytekit-<version>-py<version>/venv
#       flytekit-<version>-py<version>/venv/
#                           a Python virtualenv with flytekit and flytekitplugins-kfmpi,
#                           whose python runs serialize.py
#
# <hash> covers main.go and go.mod.in, so a change to the harness builds it afresh; the
# virtualenv is keyed by the pinned versions and the Python it is made with. The Go module is
# rendered from go.mod.in (go.sum is made by `go mod tidy`) and built without cgo, like the
# other Go tools; the virtualenv takes only binary wheels.
#
# Usage: build.sh            build if missing, print the directory
#        build.sh --print    print the directory without building
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../cluster/go-tool.sh
source "$HERE/../cluster/go-tool.sh"

FLYTE_VERSION=v1.16.8     # flyteplugins and the Flyte modules it requires
FLYTEKIT_VERSION=1.16.31  # flytekit and flytekitplugins-kfmpi
PYTHON="${PYTHON:-python3}"

PYTHON_VERSION="$("$PYTHON" -c 'import platform; print(platform.python_version())')"
DIR="$GO_TOOL_CACHE_ROOT/flyte/flyteplugins-$FLYTE_VERSION-$(cat "$HERE/main.go" "$HERE/go.mod.in" |
    sha256sum | cut -c1-12)"
VENV_DIR="$GO_TOOL_CACHE_ROOT/flyte/flytekit-$FLYTEKIT_VERSION-py$PYTHON_VERSION"

if [ "${1:-}" != "--print" ] && [ ! -f "$DIR/.complete" ]; then
    if go_tool_begin flyte-mpi "$DIR/bin"; then
        printf '%s build: github.com/flyteorg/flyte/flyteplugins@%s flyte-mpi\n' \
            "$(date -u +%H:%M:%S)" "$FLYTE_VERSION" >&2
        work="$(mktemp -d "$DIR/tmp.XXXXXX")"
        trap 'rm -rf "$work"' EXIT
        sed "s/@FLYTE_VERSION@/$FLYTE_VERSION/" "$HERE/go.mod.in" >"$work/go.mod"
        cp "$HERE/main.go" "$work/main.go"
        (
            cd "$work"
            GOFLAGS=-mod=mod go mod tidy
            go build -ldflags="-s -w" -o "$work/flyte-mpi" .
        )
        mv -f "$work/flyte-mpi" "$DIR/bin/flyte-mpi"
    fi
    # The virtualenv, built in place under its own lock and finished when .complete is written.
    mkdir -p "$VENV_DIR"
    exec 8>"$VENV_DIR/.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 8
    fi
    if [ ! -f "$VENV_DIR/.complete" ]; then
        printf '%s build: flytekit==%s flytekitplugins-kfmpi==%s\n' \
            "$(date -u +%H:%M:%S)" "$FLYTEKIT_VERSION" "$FLYTEKIT_VERSION" >&2
        rm -rf "$VENV_DIR/venv"
        "$PYTHON" -m venv "$VENV_DIR/venv"
        "$VENV_DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            --only-binary=:all: \
            "flytekit==$FLYTEKIT_VERSION" "flytekitplugins-kfmpi==$FLYTEKIT_VERSION"
        touch "$VENV_DIR/.complete"
    fi
    ln -sfn "$VENV_DIR/venv" "$DIR/venv"
    touch "$DIR/.complete"
fi
echo "$DIR"
