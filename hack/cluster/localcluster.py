#!/usr/bin/env python3
"""The local cluster's command line, run by path (``python hack/cluster/localcluster.py up``,
as the Makefile and the e2e tests do); see hack/cluster/cli.py."""

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run by path, this directory heads sys.path, where the package's modules would shadow
    # nothing yet import as top-level ones; the repository root makes this checkout's
    # package the one that runs.
    sys.path[0] = str(Path(__file__).resolve().parents[2])
    from hack.cluster.cli import main

    sys.exit(main())
