#!/usr/bin/env bash
# Builds every binary of the local development cluster from pinned Go modules
# into a cache outside the repository:
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/cluster/<key>/bin
#
# <key> hashes versions.env and the wrapper go.mod templates, so a changed
# version set builds into a new directory while a warm cache returns at once.
# Each component is built into a temporary directory and moved into bin/ only
# when it succeeded; bin/.complete is written last, so an interrupted build
# never looks finished. Re-running resumes with the components still missing.
#
# With --real-nodes it also builds what real nodes need: the kubelet from the
# same Kubernetes wrapper module, and CoreDNS. They go into the same bin/ under
# a marker of their own, keyed by node.env, so adding them never invalidates
# the control plane's binaries.
#
# With --kubernetes MINOR (say 1.37) it builds only the control plane of a second profile
# instead: kube-apiserver, kube-controller-manager and kube-scheduler at K8S_<MINOR>_VERSION of
# versions.env, from the wrapper module gomod/k8s-<MINOR>, into a key of their own (those pins,
# that module and the build tags). A cluster of that profile takes the rest (etcd, kwok,
# kubectl, the kubelet of real nodes) from the first profile's bin/.
#
# Usage: build.sh [--real-nodes]            build what is missing, print the bin directory
#        build.sh --print [--real-nodes]    print the bin directory without building; with
#                                           --real-nodes exit 3 if those binaries are missing
#        build.sh [--print] --kubernetes MINOR
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
# shellcheck source=node.env
source "$HERE/node.env"

usage() {
    echo "usage: build.sh [--print] [--real-nodes | --kubernetes MINOR]" >&2
    exit 2
}

PRINT=0
REAL_NODES=0
PROFILE=""
while [ $# -gt 0 ]; do
    case "$1" in
    --print) PRINT=1 ;;
    --real-nodes) REAL_NODES=1 ;;
    --kubernetes)
        [ $# -ge 2 ] || usage
        PROFILE="$2"
        shift
        ;;
    *) usage ;;
    esac
    shift
done
[ -z "$PROFILE" ] || [ "$REAL_NODES" = 0 ] || usage

CACHE_ROOT="${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}"
if [ -n "$PROFILE" ]; then
    pin="K8S_${PROFILE//./_}"
    version="${pin}_VERSION" staging="${pin}_STAGING_VERSION"
    if [ -z "${!version:-}" ] || [ -z "${!staging:-}" ] ||
        [ ! -f "$HERE/gomod/k8s-$PROFILE/go.mod.in" ]; then
        echo "build.sh: no Kubernetes $PROFILE profile ($version and $staging in" \
            "versions.env, gomod/k8s-$PROFILE/go.mod.in)" >&2
        exit 2
    fi
    K8S_VERSION="${!version}"
    K8S_STAGING_VERSION="${!staging}"
    KEY="$(printf 'K8S_VERSION=%s\nK8S_STAGING_VERSION=%s\nGO_BUILD_TAGS=%s\n' \
        "$K8S_VERSION" "$K8S_STAGING_VERSION" "$GO_BUILD_TAGS" |
        cat - "$HERE/gomod/k8s-$PROFILE/go.mod.in" | sha256sum | cut -c1-16)"
else
    # The second profile's block ends versions.env and is not part of this key.
    KEY="$(sed '/^# The second cluster profile/,$d' "$HERE/versions.env" |
        cat - "$HERE/gomod/etcd/go.mod.in" "$HERE/gomod/k8s/go.mod.in" | sha256sum | cut -c1-16)"
fi
KEYDIR="$CACHE_ROOT/cluster/$KEY"
BIN="$KEYDIR/bin"
NODE_MARK="$BIN/.real-nodes-$(sha256sum <"$HERE/node.env" | cut -c1-16).complete"

# Whether everything asked for is built.
built() {
    [ -f "$BIN/.complete" ] && { [ "$REAL_NODES" = 0 ] || [ -f "$NODE_MARK" ]; }
}

if [ "$PRINT" = 1 ]; then
    echo "$BIN"
    if [ "$REAL_NODES" = 1 ] && ! built; then
        exit 3
    fi
    exit 0
fi

if built; then
    echo "$BIN"
    exit 0
fi

command -v go >/dev/null 2>&1 || {
    echo "build.sh: the go command is required (Go >= 1.26, for kwok $KWOK_VERSION)" >&2
    exit 1
}

mkdir -p "$BIN" "$KEYDIR/src"

# Two builds of one key (CI and a developer, or two `cluster-up`s) would
# render the same wrapper directories; the second waits for the first and
# then finds everything built.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$KEYDIR/.lock"
    flock 9
    if built; then
        echo "$BIN"
        exit 0
    fi
fi

# One build cache for every component: identical flags keep compiled packages
# shareable between the wrappers. GOTOOLCHAIN=local keeps the installed Go.
export GOCACHE="${MPI_OPERATOR_GOCACHE:-$CACHE_ROOT/go-build}"
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="-trimpath -buildvcs=false -tags=$GO_BUILD_TAGS"
mkdir -p "$GOCACHE"

log() { printf '%s build.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

render() {
    # Fills @NAME@ placeholders from versions.env into a fresh wrapper module
    # src/DIR (default: NAME); further arguments are extra lines for its go.mod.
    local name="$1" dir="$KEYDIR/src/${2:-$1}"
    shift $(($# < 2 ? $# : 2))
    rm -rf "$dir"
    mkdir -p "$dir"
    sed -e "s|@K8S_VERSION@|$K8S_VERSION|g" \
        -e "s|@K8S_STAGING_VERSION@|$K8S_STAGING_VERSION|g" \
        -e "s|@SCHEDULER_PLUGINS_VERSION@|$SCHEDULER_PLUGINS_VERSION|g" \
        -e "s|@VOLCANO_VERSION@|$VOLCANO_VERSION|g" \
        -e "s|@VOLCANO_APIS_VERSION@|$VOLCANO_APIS_VERSION|g" \
        -e "s|@ETCD_VERSION@|$ETCD_VERSION|g" \
        "$HERE/gomod/$name/go.mod.in" >"$dir/go.mod"
    if [ $# -gt 0 ]; then
        printf '%s\n' "$@" >>"$dir/go.mod"
    fi
    if grep -q '@[A-Z_]*@' "$dir/go.mod"; then
        echo "build.sh: unfilled placeholder in gomod/$name/go.mod.in" >&2
        exit 1
    fi
    (cd "$dir" && go mod tidy)
}

# component NAME BINARIES... -- COMMAND...: runs COMMAND with $OUT set to a
# temporary directory unless every binary is already in bin/, then moves the
# binaries into place.
component() {
    local name="$1"
    shift
    local bins=()
    while [ "$1" != "--" ]; do
        bins+=("$1")
        shift
    done
    shift
    if [ -f "$BIN/.$name.ok" ]; then
        return 0
    fi
    local start=$SECONDS
    log "building $name (${bins[*]})"
    OUT="$(mktemp -d "$KEYDIR/tmp.$name.XXXXXX")"
    export OUT
    "$@"
    local b
    for b in "${bins[@]}"; do
        [ -x "$OUT/$b" ] || {
            echo "build.sh: $name did not produce $b" >&2
            exit 1
        }
    done
    for b in "${bins[@]}"; do
        mv -f "$OUT/$b" "$BIN/$b"
    done
    rmdir "$OUT" 2>/dev/null || rm -rf "$OUT"
    echo "$((SECONDS - start))" >"$BIN/.$name.ok"
    log "built $name in $((SECONDS - start))s"
}

K8S_MINOR="$(echo "$K8S_VERSION" | cut -d. -f2)"
K8S_LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    K8S_LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1"
    K8S_LDFLAGS+=" -X $pkg.gitMinor=$K8S_MINOR -X $pkg.gitTreeState=clean"
done

build_etcd() {
    render etcd
    (cd "$KEYDIR/src/etcd" && go build -ldflags="-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
    # kwok's go.mod has no replace directives, so `go install` builds exactly
    # its own tested dependency set.
    GOBIN="$OUT" go install -ldflags="-s -w" \
        "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
}

build_k8s() {
    render k8s
    local vc_ld="-s -w -X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION"
    (
        cd "$KEYDIR/src/k8s"
        go build -ldflags="$K8S_LDFLAGS" -o "$OUT/" \
            k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
            k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
        # The Kubernetes version (not scheduler-plugins' own) keeps the
        # component's compatibility-version checks happy.
        go build -ldflags="$K8S_LDFLAGS" -o "$OUT/sp-scheduler" \
            sigs.k8s.io/scheduler-plugins/cmd/scheduler
        go build -ldflags="-s -w" -o "$OUT/sp-controller" sigs.k8s.io/scheduler-plugins/cmd/controller
        go build -ldflags="$vc_ld" -o "$OUT/vc-scheduler" volcano.sh/volcano/cmd/scheduler
        go build -ldflags="$vc_ld" -o "$OUT/vc-controller-manager" \
            volcano.sh/volcano/cmd/controller-manager
    )
}

build_kubelet() {
    # The control plane's wrapper module with the kubelet as one more tool: the
    # same build list, so the Kubernetes packages they share are not compiled again.
    render k8s kubelet "tool k8s.io/kubernetes/cmd/kubelet"
    (cd "$KEYDIR/src/kubelet" && go build -ldflags="$K8S_LDFLAGS" -o "$OUT/kubelet" \
        k8s.io/kubernetes/cmd/kubelet)
}

build_coredns() {
    # CoreDNS's go.mod has no replace directives: `go install` builds its own
    # tested dependency set, with every plugin, as upstream's release does.
    GOBIN="$OUT" go install -ldflags="-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
}

build_profile() {
    render "k8s-$PROFILE"
    (cd "$KEYDIR/src/k8s-$PROFILE" && go build -ldflags="$K8S_LDFLAGS" -o "$OUT/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler)
}

TOTAL_START=$SECONDS
log "cache $KEYDIR (GOCACHE $GOCACHE, GOMODCACHE $(go env GOMODCACHE))"
if [ -n "$PROFILE" ]; then
    component "k8s-$PROFILE" kube-apiserver kube-controller-manager kube-scheduler -- build_profile
    printf 'K8S_VERSION=%s\nK8S_STAGING_VERSION=%s\n' "$K8S_VERSION" "$K8S_STAGING_VERSION" \
        >"$KEYDIR/versions.env"
    touch "$BIN/.complete"
elif [ ! -f "$BIN/.complete" ]; then
    # Smallest first, so a failure in a large build leaves the small ones cached.
    component etcd etcd -- build_etcd
    component kwok kwok kwokctl -- build_kwok
    component k8s kube-apiserver kube-controller-manager kube-scheduler kubectl \
        sp-scheduler sp-controller vc-scheduler vc-controller-manager -- build_k8s

    # Module directories the cluster tooling reads CRDs, scheduler configs and
    # kwok's stock stages from; resolved once here so cluster-up needs no go.
    {
        for mod in "sigs.k8s.io/kwok@$KWOK_VERSION" \
            "sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION" \
            "volcano.sh/volcano@$VOLCANO_VERSION"; do
            dir="$(go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
            [ -d "$dir" ] || {
                echo "build.sh: could not locate module $mod" >&2
                exit 1
            }
            echo "${mod%@*}=$dir"
        done
    } >"$KEYDIR/modules.env.tmp"
    mv -f "$KEYDIR/modules.env.tmp" "$KEYDIR/modules.env"
    cp "$HERE/versions.env" "$KEYDIR/versions.env"
    touch "$BIN/.complete"
fi
if [ "$REAL_NODES" = 1 ]; then
    component kubelet kubelet -- build_kubelet
    component "coredns-$COREDNS_VERSION" coredns -- build_coredns
    touch "$NODE_MARK"
fi
log "all binaries ready in $((SECONDS - TOTAL_START))s"
echo "$BIN"
