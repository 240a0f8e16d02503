"""The container images of the real nodes, as hack/images/build.py names and builds them.

build.py is a script that imports its sibling oci.py by plain name; :func:`images_tool` loads
it as a module (once per process), so that Python code reads names from the one place that
declares them (hack/images/spec.toml, through build.py's ``Spec``) instead of repeating them.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from hack.cluster.state import HERE

IMAGES_TOOL = HERE.parent / "images" / "build.py"
_MODULE = "mpi_operator_images_build"


def images_tool() -> ModuleType:
    """hack/images/build.py as a module."""
    if _MODULE not in sys.modules:
        directory = str(IMAGES_TOOL.parent)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        spec = importlib.util.spec_from_file_location(_MODULE, IMAGES_TOOL)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[_MODULE]


def kubectl_delivery_image() -> str:
    """``docker.io/library/mpi-operator-kubectl-delivery:<K8S_VERSION>``: the image whose
    entrypoint, run without a command, copies its kubectl (the one hack/cluster/build.sh builds,
    of versions.env's K8S_VERSION) to ``$TARGET_DIR/kubectl`` (default ``/opt/kube``), mode
    0755, as any non-root uid, and exits 0. Real nodes import it with the other images."""
    return str(images_tool().Spec.load().kubectl_delivery.name)
