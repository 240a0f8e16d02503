#!/usr/bin/env bash
# Builds Helm from its pinned Go module into a cache outside the repository,
# keyed by its own version (the cluster binaries' key in build.sh is untouched):
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/helm/<version>-<flags>/bin/helm
#
# <flags> hashes the link flags, so changing them builds afresh.
#
# The binary is moved into place only after a successful build, so an
# interrupted build never looks finished.
#
# Usage: build-helm.sh            build if missing, print the helm binary's path
#        build-helm.sh --print    print the path without building
set -euo pipefail

HELM_VERSION=v3.19.0
# The Kubernetes version of helm's own client-go (v0.34.x): `helm template` and `helm lint`
# assume it for .Capabilities and the chart's kubeVersion check, as helm's Makefile sets it.
HELM_K8S_MAJOR=1
HELM_K8S_MINOR=34
LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    LDFLAGS+=" -X $pkg.k8sVersionMajor=$HELM_K8S_MAJOR -X $pkg.k8sVersionMinor=$HELM_K8S_MINOR"
done

CACHE_ROOT="${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}"
BIN="$CACHE_ROOT/helm/$HELM_VERSION-$(echo "$LDFLAGS" | sha256sum | cut -c1-12)/bin"

if [ "${1:-}" = "--print" ] || [ -x "$BIN/helm" ]; then
    echo "$BIN/helm"
    exit 0
fi

command -v go >/dev/null 2>&1 || {
    echo "build-helm.sh: the go command is required to build helm $HELM_VERSION" >&2
    exit 1
}

mkdir -p "$BIN"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$BIN/.lock"
    flock 9
    if [ -x "$BIN/helm" ]; then
        echo "$BIN/helm"
        exit 0
    fi
fi

export GOCACHE="${MPI_OPERATOR_GOCACHE:-$CACHE_ROOT/go-build}"
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="-trimpath -buildvcs=false"
mkdir -p "$GOCACHE"

OUT="$(mktemp -d "$BIN/../tmp.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
printf '%s build-helm.sh: building helm %s\n' "$(date -u +%H:%M:%S)" "$HELM_VERSION" >&2
# Helm's go.mod has no replace directives, so `go install` builds exactly its
# own tested dependency set.
GOBIN="$OUT" go install -ldflags="$LDFLAGS" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
mv -f "$OUT/helm" "$BIN/helm"
echo "$BIN/helm"
