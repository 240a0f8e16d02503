"""A Kubernetes operator for kubeflow.org/v2beta1 and v1 MPIJobs."""

__version__ = "0.1.0"
