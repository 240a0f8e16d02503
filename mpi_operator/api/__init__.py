"""The kubeflow.org/v2beta1 and v1 MPIJob API: models, defaults, validation and the CRD."""
