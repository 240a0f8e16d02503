"""The MPIJob controller: one sync of one job, from caches to the API writes that differ."""
