"""Desired state: pure functions from an MPIJob (and cluster facts) to Kubernetes objects."""
