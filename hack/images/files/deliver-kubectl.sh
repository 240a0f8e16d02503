#!/bin/sh
# The kubectl-delivery image's entrypoint (spec.toml, [kubectl-delivery]), run with no command
# or arguments as an init container: copies the image's kubectl to $TARGET_DIR/kubectl (the
# image sets TARGET_DIR=/opt/kube), mode 0755 so any user of the pod's other containers can run
# it, and exits 0. It works as any uid that may write to $TARGET_DIR, an emptyDir in practice
# (mode 0777). The copy is renamed into place: a rerun replaces what an earlier run left,
# whichever uid wrote it, and nobody ever sees half a kubectl.
set -eu

: "${TARGET_DIR:?names the directory to copy kubectl into, e.g. /opt/kube}"
if [ ! -d "$TARGET_DIR" ] || [ ! -w "$TARGET_DIR" ]; then
    echo "deliver-kubectl: $TARGET_DIR is not a directory this user can write to" >&2
    exit 1
fi

partial="$TARGET_DIR/.kubectl.partial"
trap 'rm -f "$partial"' EXIT
rm -f "$partial"
cp /bin/kubectl "$partial"
chmod 0755 "$partial"
mv -f "$partial" "$TARGET_DIR/kubectl"
echo "deliver-kubectl: copied /bin/kubectl to $TARGET_DIR/kubectl"
