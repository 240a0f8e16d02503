"""Serializes the Flyte tasks of mpi_tasks.py offline, as `pyflyte serialize` does before
registration (flytekit's own translator, default serialization mode), and writes one
TaskTemplate per task as protobuf JSON (camelCase, the form flyteidl's JSON mapping reads):

    OUT/mpi.json             MPIJob, 2 workers, 1 slot
    OUT/mpi-run-policy.json  the same with a RunPolicy (cleanPodPolicy All, backoffLimit 2,
                             activeDeadlineSeconds 600)
    OUT/horovod.json         HorovodJob, 2 workers, 1 slot

Run by the python of build.sh's virtualenv (flytekit and flytekitplugins-kfmpi), never by the
project's: `VENV/bin/python hack/flyte/serialize.py OUT`. The output depends only on the
pinned flytekit and these arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict
from pathlib import Path

from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from google.protobuf.json_format import MessageToDict

# mpi_tasks.py is beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import mpi_tasks

TASKS = {
    "mpi": mpi_tasks.mpi_hello,
    "mpi-run-policy": mpi_tasks.mpi_run_policy,
    "horovod": mpi_tasks.horovod_hello,
}

# flytekit's default image for Python 3.11, named outright so that the templates do not change
# with the virtualenv's Python.
DEFAULT_IMAGE = "cr.flyte.org/flyteorg/flytekit:py3.11-1.16.31"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory for the TaskTemplate JSON files")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="the tasks' container image")
    parser.add_argument("--project", default="flytesnacks")
    parser.add_argument("--domain", default="development")
    parser.add_argument("--version", default="v1")
    args = parser.parse_args()

    settings = SerializationSettings(
        image_config=ImageConfig.auto(img_name=args.image),
        project=args.project,
        domain=args.domain,
        version=args.version,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    for name, entity in TASKS.items():
        spec = get_serializable(OrderedDict(), settings, entity)
        template = MessageToDict(spec.template.to_flyte_idl())
        text = json.dumps(template, indent=2, sort_keys=True) + "\n"
        (args.out / f"{name}.json").write_text(text)
        print(args.out / f"{name}.json")


if __name__ == "__main__":
    main()
