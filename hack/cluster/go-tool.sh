# Shared by the build scripts of single Go programs (Helm, Kueue, the benchmark's tools): each
# is built into a cache directory outside the repository, moved into place only after a
# successful build (so an interrupted build never looks finished), and two builds of one key
# wait for each other. Source it, then call
#   go_tool_install NAME PACKAGE@VERSION LDFLAGS BIN_DIR     `go install` of a pinned module
# or, for a build of one's own,
#   go_tool_begin NAME BIN_DIR || { echo "$BIN_DIR/NAME"; exit 0; }   # already built
# and go_module_dir MODULE@VERSION for a module's files (CRDs, manifests) beside the binary.
# shellcheck shell=bash

GO_TOOL_CACHE_ROOT="${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}"

# Fails (returns 1) when BIN_DIR/NAME is built. Otherwise checks for go, takes BIN_DIR's lock
# for the rest of the script, exports the build environment and returns 0.
go_tool_begin() {
    local name="$1" bin="$2"
    [ -x "$bin/$name" ] && return 1
    command -v go >/dev/null 2>&1 || {
        echo "build: the go command is required to build $name" >&2
        exit 1
    }
    mkdir -p "$bin"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$bin/.lock"
        flock 9
        [ -x "$bin/$name" ] && return 1
    fi
    # One build cache for every tool; GOTOOLCHAIN=local keeps the installed Go.
    export GOCACHE="${MPI_OPERATOR_GOCACHE:-$GO_TOOL_CACHE_ROOT/go-build}"
    export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
    mkdir -p "$GOCACHE"
    return 0
}

go_tool_install() {
    local name="$1" target="$2" ldflags="$3" bin="$4"
    go_tool_begin "$name" "$bin" || return 0
    local out
    out="$(mktemp -d "$bin/../tmp.XXXXXX")"
    printf '%s build: %s\n' "$(date -u +%H:%M:%S)" "$target" >&2
    # The tools' go.mod files have no replace directives, so `go install` builds exactly
    # their own tested dependency sets.
    if ! GOBIN="$out" go install -ldflags="$ldflags" "$target"; then
        rm -rf "$out"
        return 1
    fi
    mv -f "$out/$name" "$bin/$name"
    rm -rf "$out"
}

# The directory of MODULE@VERSION in the module cache, downloaded when missing.
go_module_dir() {
    GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "$1" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}
