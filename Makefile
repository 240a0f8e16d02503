# Everything runs from a project-local virtualenv so a fresh clone needs only python3.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python

.PHONY: all prerequisites venv lint typecheck unit test fuzz generate verify-generate render-examples clean images release

all: test

# pycurl is built from its source against the system's libcurl and OpenSSL (hack/prerequisites.py
# installs the headers): its binary wheel brings a second OpenSSL into the process.
$(BIN)/mpi-operator: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-binary pycurl -e '.[dev,curl]'
	touch $@

venv: $(BIN)/mpi-operator

# What the machine needs for the local cluster's real nodes and images (Go, containerd, runc,
# the CNI plugins, mmdebstrap), checked in seconds before any long build; as root with apt-get,
# missing Debian packages are installed, otherwise one line names the command.
prerequisites:
	@$(PYTHON) hack/prerequisites.py --install

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: venv
	$(BIN)/mypy
	$(BIN)/mypy hack/images/build.py hack/images/oci.py hack/pod_template_schema.py \
		hack/prerequisites.py hack/release.py

unit: venv
	$(BIN)/pytest tests/unit tests/fuzz

# The long fuzz run (tests/fuzz/run.py): EXAMPLES manifests from a fixed SEED through render
# and the operator's sync; fails on any traceback, hang or accepted-but-invalid object.
EXAMPLES ?= 10000
SEED     ?= 20261123
fuzz: venv
	PYTHONPATH=tests $(PY) -m fuzz.run --examples $(EXAMPLES) --seed $(SEED)

# The one command that runs every check: lint, types, unit tests and the
# cluster-backed tests (which bring up the local cluster themselves).
# pytest exits 5 when it collected nothing; make fails on any non-zero exit, so that is a
# failure too, and it says why.
test: prerequisites lint typecheck
	@$(BIN)/pytest --durations=40 tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; \
	exit $$rc

# Regenerate committed artefacts from their single sources of truth.
generate: venv
	$(PY) -m mpi_operator.api.crd > crds/kubeflow.org_mpijobs.yaml
	cp crds/kubeflow.org_mpijobs.yaml charts/mpi-operator/crds/kubeflow.org_mpijobs.yaml
	bash hack/render-deploy.sh
	$(PY) hack/pod_template_schema.py

verify-generate: venv
	$(PY) -m mpi_operator.api.crd | diff -u crds/kubeflow.org_mpijobs.yaml -
	$(PY) hack/pod_template_schema.py --check
	diff -u crds/kubeflow.org_mpijobs.yaml charts/mpi-operator/crds/kubeflow.org_mpijobs.yaml

# Helm from its pinned Go module, cached outside the repository; prints the binary's path.
.PHONY: helm
helm:
	@bash hack/cluster/build-helm.sh

# The container images of the local cluster's real nodes (pause, MPI bases, pi, kubectl-delivery)
# and the operator's own image, built from Debian packages and PyPI wheels into the cache;
# prints one OCI layout tar per image. The kubectl-delivery image holds the kubectl of
# hack/cluster/build.sh, which builds it first when it is missing (20-40 minutes cold).
images: venv
	$(PY) hack/images/build.py

# A release of this source tree in $(DIST) (hack/release.py): the operator image as an OCI
# layout tar, the chart package, the CRD, one install YAML (CRD, namespace, RBAC, Deployment)
# whose image is the release's by digest, and SHA256SUMS. IMAGE_REPOSITORY is where the image
# will be pushed (only names change with it, never the digest). Seconds with the image cache
# warm; the same bytes every time.
DIST             ?= dist
IMAGE_REPOSITORY ?= docker.io/library/mpi-operator
release: venv
	$(PY) hack/release.py --out $(DIST) --repository $(IMAGE_REPOSITORY)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

-include hack/cluster/cluster.mk

# The main job, end to end: a local cluster with real nodes, CRD, operator, the pi example
# computing pi in real pods to Succeeded.
.PHONY: demo
demo: prerequisites venv
	$(PY) hack/demo.py --scheduler $(or $(SCHEDULER),default) $(if $(NAME),--name $(NAME))
