"""``python -m mpi_operator``: the same command as ``mpi-operator``."""

import sys

from mpi_operator.cli import main

sys.exit(main())
