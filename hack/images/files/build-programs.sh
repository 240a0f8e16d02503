#!/bin/sh
# Runs inside the builder root filesystem: compiles pi against every MPI and
# the static pause program into $1.
set -eu
out="$1"
src="$(dirname "$0")"
mkdir -p "$out"
cflags="-O2 -Wall -Wextra -Werror"

gcc $cflags -static -s -o "$out/pause" "$src/pause.c"
mpicc.openmpi $cflags -o "$out/pi-openmpi" "$src/pi.c" -lm
/opt/mpich/bin/mpicc $cflags -o "$out/pi-mpich" "$src/pi.c" -lm
/usr/local/bin/mpicc $cflags -o "$out/pi-openmpi5" "$src/pi.c" -lm
(
    . /opt/intel/mpi/env/vars.sh
    mpicc $cflags -o "$out/pi-intel" "$src/pi.c" -lm
)
strip "$out"/pi-*
