#!/usr/bin/env bash
# Builds Helm from its pinned Go module into a cache outside the repository,
# keyed by its own version (the cluster binaries' key in build.sh is untouched):
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/helm/<version>-<flags>/bin/helm
#
# <flags> hashes the link flags, so changing them builds afresh.
#
# Usage: build-helm.sh            build if missing, print the helm binary's path
#        build-helm.sh --print    print the path without building
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=go-tool.sh
source "$HERE/go-tool.sh"

HELM_VERSION=v3.19.0
# The Kubernetes version of helm's own client-go (v0.34.x): `helm template` and `helm lint`
# assume it for .Capabilities and the chart's kubeVersion check, as helm's Makefile sets it.
HELM_K8S_MAJOR=1
HELM_K8S_MINOR=34
LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    LDFLAGS+=" -X $pkg.k8sVersionMajor=$HELM_K8S_MAJOR -X $pkg.k8sVersionMinor=$HELM_K8S_MINOR"
done

BIN="$GO_TOOL_CACHE_ROOT/helm/$HELM_VERSION-$(echo "$LDFLAGS" | sha256sum | cut -c1-12)/bin"

if [ "${1:-}" != "--print" ]; then
    go_tool_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$LDFLAGS" "$BIN"
fi
echo "$BIN/helm"
