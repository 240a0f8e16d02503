# The operator image. The virtualenv is built in a throw-away stage and copied onto the same
# base image, so its interpreter symlinks resolve and nothing used to build ships.
#
#   docker build -t mpi-operator:0.1.0 .
#
# The deploy manifests (deploy/) run it as uid 65532 with a read-only root filesystem.
# hack/images/build.py builds the same image without a container engine (spec.toml's
# [operator]); tests/unit/test_operator_image.py fails when the two disagree on the Python
# version, user, entrypoint, working directory, ports, environment or labels.
# Debian bookworm, the suite hack/images/spec.toml builds on (its libcurl4 is pycurl's).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# Kubernetes' own kubectl image, of hack/cluster/versions.env's K8S_VERSION: the operator's image
# is also the kubectl-delivery image of kubeflow.org/v1 launchers (mpi-operator deliver-kubectl).
ARG KUBECTL_IMAGE=registry.k8s.io/kubectl:v1.34.1

FROM ${KUBECTL_IMAGE} AS kubectl

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# Only what the wheel is built from: pyproject.toml reads README.md and LICENSE, and crds/ is
# packaged.
COPY pyproject.toml README.md LICENSE ./
COPY crds/ crds/
COPY gang/ gang/
COPY mpi_operator/ mpi_operator/
# Binary wheels only, but for pycurl (the extra `curl`, which the image always has): it is
# compiled against Debian's libcurl, which shares Python's OpenSSL (its binary wheel carries a
# second one). Any other dependency that would
# need a compiler fails the build here. pip compiles the bytecode at install time, which the
# read-only root filesystem needs (nothing can be written at run time).
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libcurl4-openssl-dev \
 && python -m pip wheel --only-binary=:all: --no-binary=pycurl --wheel-dir /wheels '.[curl]' \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-index --find-links /wheels 'mpi-operator[curl]' \
 && /opt/venv/bin/pip uninstall --yes pip \
 && /opt/venv/bin/mpi-operator --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="mpi-operator" \
      org.opencontainers.image.description="Kubernetes operator for kubeflow.org/v2beta1 and v1 MPIJobs" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
# The operator installs nothing at run time: drop the base image's packaging tools, and give
# the numeric user a name so tools that look it up do not fail.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcurl4 \
 && rm -rf /var/lib/apt/lists/* \
 && python -m pip uninstall --yes --root-user-action=ignore pip setuptools wheel \
 && groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin nonroot
COPY --from=builder /opt/venv /opt/venv
COPY --from=kubectl /bin/kubectl /usr/local/bin/kubectl
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
WORKDIR /
# /healthz and /readyz; /metrics with --monitoring-port=8081 (as deploy/ sets it).
EXPOSE 8080 8081
# Python itself: no shell or script wrapper is needed to start.
ENTRYPOINT ["/opt/venv/bin/python", "-m", "mpi_operator"]
