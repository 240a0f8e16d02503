#!/usr/bin/env bash
# Builds Kueue's controller manager from its pinned Go module into a cache outside the
# repository, with the manifests the local cluster installs next to it (the CRDs and the
# webhook configurations, from the same module version):
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/kueue/<version>/
#       bin/kueue  crd/*.yaml  crd-kustomization.yaml  webhook-manifests.yaml
#
# Usage: build-kueue.sh            build if missing, print the directory
#        build-kueue.sh --print    print the directory without building
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=go-tool.sh
source "$HERE/go-tool.sh"

KUEUE_VERSION=v0.17.0
DIR="$GO_TOOL_CACHE_ROOT/kueue/$KUEUE_VERSION"

if [ "${1:-}" != "--print" ] && [ ! -f "$DIR/.complete" ]; then
    go_tool_install kueue "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" "-s -w" "$DIR/bin"
    src="$(go_module_dir "sigs.k8s.io/kueue@$KUEUE_VERSION")"
    rm -rf "$DIR/crd"
    mkdir -p "$DIR/crd"
    cp "$src"/config/components/crd/bases/*.yaml "$DIR/crd/"
    cp "$src/config/components/crd/kustomization.yaml" "$DIR/crd-kustomization.yaml"
    cp "$src/config/components/webhook/manifests.yaml" "$DIR/webhook-manifests.yaml"
    chmod -R u+w "$DIR"
    touch "$DIR/.complete"
fi
echo "$DIR"
