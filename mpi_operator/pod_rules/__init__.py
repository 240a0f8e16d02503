"""What Kubernetes' API server checks in a pod template and in names, as field-addressed
problems: its OpenAPI schema of a PodTemplateSpec (generated from the pinned release) and the
rules the schema cannot express. Nothing here knows of MPIJobs."""
