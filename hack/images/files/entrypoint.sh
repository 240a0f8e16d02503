#!/bin/bash
# Prepares the MPI environment, and on the launcher waits until its own name and
# every host in the hostfile resolve (Hydra gives up on a name that does not),
# then runs the container's command.

if [ -f /opt/intel/mpi/env/vars.sh ]; then
    # shellcheck source=/dev/null
    source /opt/intel/mpi/env/vars.sh
fi

# Tries a name 11 times, waiting 0.1 s, 0.2 s, 0.4 s, ... in between (about
# 100 s in all), and goes on either way: mpirun reports a name that never came.
# Arguments after the name go to getent (e.g. "-s dns").
wait_for_name() {
    local name="$1" delay=0.1 attempt
    shift
    for attempt in $(seq 0 10); do
        if getent "$@" hosts "$name" >/dev/null; then
            echo "Resolved $name"
            return 0
        fi
        [ "$attempt" -eq 10 ] && break
        echo "Cannot resolve $name yet, retrying in ${delay}s"
        sleep "$delay"
        delay=$(awk -v d="$delay" 'BEGIN { print d * 2 }')
    done
    echo "Could not resolve $name"
}

if [ "${K_MPI_JOB_ROLE:-}" = "launcher" ]; then
    # The workers' MPI daemons call the launcher back by name through DNS, which knows it
    # only once its endpoint is published; /etc/hosts always names the pod itself, so where
    # the pod has a name server its own name is looked up there alone.
    if grep -qs '^nameserver' /etc/resolv.conf; then
        wait_for_name "$(hostname)" -s dns
    else
        wait_for_name "$(hostname)"
    fi
    if [ -f /etc/mpi/hostfile ]; then
        # Lines are "host:slots" (MPICH, Intel) or "host slots=N" (Open MPI).
        while read -r entry _; do
            [ -n "$entry" ] && wait_for_name "${entry%%:*}"
        done </etc/mpi/hostfile
    fi
fi

exec "$@"
