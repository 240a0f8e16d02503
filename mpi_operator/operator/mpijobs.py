"""Where MPIJobs live in the API: the process checks their CRD before the Lease, the caches
list and watch them once it leads."""

from typing import Final

from mpi_operator.api import constants as c
from mpi_operator.runtime.client import Resource

MPIJOBS: Final = Resource(*c.MPIJOB_RESOURCE, namespaced=True, kind=c.KIND)
