# Shared by the build scripts of single Go tools (Helm, Kueue): `go install` of one pinned
# module version into a cache directory outside the repository. Source it, then call
#   go_tool_install NAME PACKAGE@VERSION LDFLAGS BIN_DIR
# The binary is moved into BIN_DIR only after a successful build, so an interrupted build
# never looks finished; two builds of one key wait for each other.
# shellcheck shell=bash

GO_TOOL_CACHE_ROOT="${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}"

go_tool_install() {
    local name="$1" target="$2" ldflags="$3" bin="$4"
    if [ -x "$bin/$name" ]; then
        return 0
    fi
    command -v go >/dev/null 2>&1 || {
        echo "build: the go command is required to build $target" >&2
        return 1
    }
    mkdir -p "$bin"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$bin/.lock"
        flock 9
        if [ -x "$bin/$name" ]; then
            return 0
        fi
    fi
    local out
    out="$(mktemp -d "$bin/../tmp.XXXXXX")"
    printf '%s build: %s\n' "$(date -u +%H:%M:%S)" "$target" >&2
    # The tools' go.mod files have no replace directives, so `go install` builds exactly
    # their own tested dependency sets. GOTOOLCHAIN=local keeps the installed Go.
    if ! GOCACHE="${MPI_OPERATOR_GOCACHE:-$GO_TOOL_CACHE_ROOT/go-build}" GOTOOLCHAIN=local \
        CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" GOBIN="$out" \
        go install -ldflags="$ldflags" "$target"; then
        rm -rf "$out"
        return 1
    fi
    mv -f "$out/$name" "$bin/$name"
    rm -rf "$out"
}
