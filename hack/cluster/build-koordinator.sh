#!/usr/bin/env bash
# Builds Koordinator's scheduler (koord-scheduler) from its pinned Go module into a cache
# outside the repository, with the module's CRDs next to it (the local cluster installs the
# few the scheduler watches):
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/koordinator/<version>/
#       bin/koord-scheduler  crd/*.yaml
#
# Koordinator's go.mod pins Kubernetes 1.28 through replace directives, which `go install`
# ignores, so the binary is built from a wrapper module that requires Koordinator and copies
# those directives from the module's own go.mod.
#
# Usage: build-koordinator.sh            build if missing, print the directory
#        build-koordinator.sh --print    print the directory without building
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=go-tool.sh
source "$HERE/go-tool.sh"

KOORDINATOR_MODULE=github.com/koordinator-sh/koordinator
KOORDINATOR_VERSION=v1.7.0
DIR="$GO_TOOL_CACHE_ROOT/koordinator/$KOORDINATOR_VERSION"

if [ "${1:-}" != "--print" ] && [ ! -f "$DIR/.complete" ]; then
    src="$(go_module_dir "$KOORDINATOR_MODULE@$KOORDINATOR_VERSION")"
    if go_tool_begin koord-scheduler "$DIR/bin"; then
        printf '%s build: %s@%s koord-scheduler\n' "$(date -u +%H:%M:%S)" \
            "$KOORDINATOR_MODULE" "$KOORDINATOR_VERSION" >&2
        work="$(mktemp -d "$DIR/tmp.XXXXXX")"
        trap 'rm -rf "$work"' EXIT
        {
            echo "module koord-scheduler-build"
            echo
            echo "go 1.20"
            echo
            echo "require $KOORDINATOR_MODULE $KOORDINATOR_VERSION"
            echo
            sed -n '/^replace (/,/^)/p' "$src/go.mod"
        } >"$work/go.mod"
        # The blank import of the command keeps `go mod tidy` from dropping what it needs.
        printf '//go:build tools\n\npackage tools\n\nimport _ "%s/cmd/koord-scheduler"\n' \
            "$KOORDINATOR_MODULE" >"$work/tools.go"
        (
            cd "$work"
            GOFLAGS=-mod=mod go mod tidy
            go build -ldflags="-s -w" -o "$work/koord-scheduler" \
                "$KOORDINATOR_MODULE/cmd/koord-scheduler"
        )
        mv -f "$work/koord-scheduler" "$DIR/bin/koord-scheduler"
    fi
    rm -rf "$DIR/crd"
    mkdir -p "$DIR/crd"
    cp "$src"/config/crd/bases/*.yaml "$DIR/crd/"
    chmod -R u+w "$DIR"
    touch "$DIR/.complete"
fi
echo "$DIR"
