#!/usr/bin/env bash
# Builds training-operator's controller manager (kubeflow/training-operator, whose MPIJob
# controller this project replaces while its other job kinds keep running) from its pinned Go
# module into a cache outside the repository, for the test that runs the two side by side:
#
#   ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}/training-operator/<version>/bin/training-operator.v1
#
# Usage: build-training-operator.sh            build if missing, print the binary's path
#        build-training-operator.sh --print    print the path without building
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=go-tool.sh
source "$HERE/go-tool.sh"

TRAINING_OPERATOR_VERSION=v1.8.1
BIN="$GO_TOOL_CACHE_ROOT/training-operator/$TRAINING_OPERATOR_VERSION/bin"

if [ "${1:-}" != "--print" ]; then
    go_tool_install training-operator.v1 \
        "github.com/kubeflow/training-operator/cmd/training-operator.v1@$TRAINING_OPERATOR_VERSION" \
        "-s -w" "$BIN"
fi
echo "$BIN/training-operator.v1"
