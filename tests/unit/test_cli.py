"""The ``mpi-operator`` command: ``render`` on every example, and every way input can be wrong."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml

from mpi_operator import __version__
from mpi_operator.cli import dump_objects, main
from mpi_operator.manifest import MAX_BYTES
from mpi_operator.testing.wrappers import MPIJobWrapper

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").rglob("*.yaml"))
PI = ROOT / "examples" / "pi" / "pi.yaml"
GANG_SCHEDULERS = {
    None: None,
    "volcano": "scheduling.volcano.sh",
    "scheduler-plugins-scheduler": "scheduling.x-k8s.io",
}


def render(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]], str]:
    code = main(["render", *argv])
    out, err = capsys.readouterr()
    return code, [doc for doc in yaml.safe_load_all(out) if doc is not None], err


def pi_with(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def pi_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(PI.read_text())
    return job


def role(job: dict[str, Any], replica_type: str) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["mpiReplicaSpecs"][replica_type]
    return spec


def render_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line a refused ``render`` prints on stderr, with nothing on stdout."""
    assert main(["render", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.fixture
def stdin(monkeypatch: pytest.MonkeyPatch) -> Any:
    def feed(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))

    return feed


@pytest.mark.parametrize("gang", list(GANG_SCHEDULERS), ids=lambda g: g or "no-gang")
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_example_renders(
    capsys: pytest.CaptureFixture[str], example: Path, gang: str | None
) -> None:
    job = yaml.safe_load(example.read_text())
    name, workers = job["metadata"]["name"], job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    gang_args = ["--gang-scheduling", gang] if gang else []

    code, objects, err = render(capsys, "-f", str(example), *gang_args)

    assert (code, err) == (0, "")
    pod_group = ["PodGroup"] if gang else []
    exec_access = []
    if job["apiVersion"] == "kubeflow.org/v1":  # kubectl exec: no Service or SSH keys
        shared = ["ConfigMap"]
        # The grant only after the pods it names.
        exec_access = ["ServiceAccount", "Role", "RoleBinding"]
    else:
        shared = ["Service", "ConfigMap", "Secret"]
    kinds = [*shared, *pod_group, *["Pod"] * workers, *exec_access, "Job"]
    assert [obj["kind"] for obj in objects] == kinds
    assert {obj["metadata"]["namespace"] for obj in objects} == {"default"}
    pods = [obj for obj in objects if obj["kind"] == "Pod"]
    assert [pod["metadata"]["name"] for pod in pods] == [
        f"{name}-worker-{index}" for index in range(workers)
    ]
    if gang:
        [group] = [obj for obj in objects if obj["kind"] == "PodGroup"]
        assert group["apiVersion"].split("/")[0] == GANG_SCHEDULERS[gang]
        assert {pod["spec"].get("schedulerName") for pod in pods} == {gang}


def test_output_keeps_key_order_and_writes_multi_line_strings_as_blocks() -> None:
    text = dump_objects([{"kind": "ConfigMap", "data": {"hostfile": "a\nb\n"}}, {"z": 1, "a": 2}])
    assert text == "---\nkind: ConfigMap\ndata:\n  hostfile: |\n    a\n    b\n---\nz: 1\na: 2\n"


def test_render_reads_stdin(capsys: pytest.CaptureFixture[str], stdin: Any) -> None:
    stdin(PI.read_text())
    code, objects, err = render(capsys, "-f", "-")
    assert (code, err) == (0, "")
    assert objects[0]["metadata"]["name"] == "pi"


def test_render_keeps_the_jobs_namespace(capsys: pytest.CaptureFixture[str], stdin: Any) -> None:
    job = pi_job()
    job["metadata"]["namespace"] = "research"
    stdin(yaml.safe_dump(job))
    code, objects, _ = render(capsys, "-f", "-")
    assert code == 0
    assert {obj["metadata"]["namespace"] for obj in objects} == {"research"}


def test_priority_classes_reach_the_gang(capsys: pytest.CaptureFixture[str], stdin: Any) -> None:
    job = pi_job()
    role(job, "Worker")["template"]["spec"]["priorityClassName"] = "high"
    stdin(yaml.safe_dump(job))
    code, objects, err = render(
        capsys,
        "-f",
        "-",
        "--gang-scheduling",
        "volcano",
        "--priority-class",
        "high=1000",
        "--priority-class",
        "low=-5",
        "--cluster-domain",
        "cluster.example",
    )
    assert (code, err) == (0, "")
    assert "PodGroup" in [obj["kind"] for obj in objects]


def test_an_invalid_job_prints_only_its_problem(
    capsys: pytest.CaptureFixture[str], stdin: Any
) -> None:
    job = pi_job()
    role(job, "Launcher")["replicas"] = 2
    stdin(yaml.safe_dump(job))
    assert render_error(capsys, "-f", "-") == "spec.mpiReplicaSpecs[Launcher].replicas: must be 1\n"


def test_every_problem_gets_its_own_line(capsys: pytest.CaptureFixture[str], stdin: Any) -> None:
    job = pi_job()
    role(job, "Launcher")["replicas"] = 2
    role(job, "Worker")["replicas"] = 0
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "Sometimes"
    stdin(yaml.safe_dump(job))
    assert render_error(capsys, "-f", "-").splitlines() == [
        "spec.mpiReplicaSpecs[Launcher].replicas: must be 1",
        "spec.mpiReplicaSpecs[Worker].replicas: must be greater than or equal to 1",
        'spec.runPolicy.cleanPodPolicy: unsupported value "Sometimes": must be one of '
        '"All", "None", "Running"',
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "spec: [unclosed\n",
            "mpi-operator render: <stdin>: not valid YAML: ",
            id="bad YAML",
        ),
        pytest.param(
            PI.read_text() + "---\n" + PI.read_text(),
            "mpi-operator render: <stdin>: expected one MPIJob, found 2 YAML documents",
            id="two documents",
        ),
        pytest.param("", "mpi-operator render: <stdin>: no MPIJob in the input", id="empty"),
        pytest.param(
            pi_with(PI.read_text(), "slotsPerWorker: 1", "slotsPerWorker: one"),
            "spec.slotsPerWorker: must be an integer",
            id="wrong type",
        ),
    ],
)
def test_unusable_input_is_one_line(
    capsys: pytest.CaptureFixture[str], stdin: Any, text: str, expected: str
) -> None:
    stdin(text)
    err = render_error(capsys, "-f", "-")
    assert len(err.splitlines()) == 1
    assert err.startswith(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
            [
                'apiVersion: unsupported value "v1": must be one of "kubeflow.org/v2beta1", '
                '"kubeflow.org/v1"',
                'kind: unsupported value "Pod": must be "MPIJob"',
            ],
            id="wrong kind",
        ),
        pytest.param(
            "apiVersion: kubeflow.org/v1beta2\nkind: MPIJob\n",
            [
                'apiVersion: unsupported value "kubeflow.org/v1beta2": must be one of '
                '"kubeflow.org/v2beta1", "kubeflow.org/v1"'
            ],
            id="wrong apiVersion",
        ),
        pytest.param(
            'apiVersion: kubeflow.org/v2beta1\nkind: "MPI\\nJob\\u2028"\n',
            ['kind: unsupported value "MPI\\nJob\\u2028": must be "MPIJob"'],
            id="a value with line breaks",
        ),
        pytest.param("- a\n- b\n", ["<root>: must be an MPIJob object, found a list"], id="a list"),
        pytest.param("42\n", ["<root>: must be an MPIJob object, found a number"], id="a number"),
    ],
)
def test_document_problems_name_their_field(
    capsys: pytest.CaptureFixture[str], stdin: Any, text: str, expected: list[str]
) -> None:
    stdin(text)
    assert render_error(capsys, "-f", "-").splitlines() == expected


def test_an_unquoted_date_stays_a_string(capsys: pytest.CaptureFixture[str], stdin: Any) -> None:
    # kubectl sends `2024-01-01` as a string; a YAML timestamp would fail the label check.
    worker_template = (
        "      template:\n        spec:\n          containers:\n            - name: mpi-worker"
    )
    dated = worker_template.replace(
        "      template:\n",
        "      template:\n        metadata:\n          labels:\n            since: 2024-01-01\n",
    )
    stdin(pi_with(PI.read_text(), worker_template, dated))
    code, objects, err = render(capsys, "-f", "-")
    assert (code, err) == (0, "")
    worker = next(obj for obj in objects if obj["kind"] == "Pod")
    assert worker["metadata"]["labels"]["since"] == "2024-01-01"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(
            ["-f", "missing.yaml"],
            "mpi-operator render: cannot read missing.yaml: No such file or directory",
            id="missing file",
        ),
        pytest.param(
            ["-f", str(ROOT / "examples")],
            f"mpi-operator render: cannot read {ROOT / 'examples'}: Is a directory",
            id="a directory",
        ),
        pytest.param(
            ["-f", str(PI), "--priority-class", "high=1", "--priority-class", "high=2"],
            "mpi-operator render: --priority-class 'high' is given more than once",
            id="priority class twice",
        ),
        pytest.param(
            [],
            "mpi-operator render: the following arguments are required: -f/--filename",
            id="no file",
        ),
        pytest.param(
            ["-f", str(PI), "--replicas", "3"],
            "mpi-operator render: unrecognized arguments: --replicas 3",
            id="unknown flag",
        ),
    ],
)
def test_bad_command_lines_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    err = render_error(capsys, *argv)
    assert len(err.splitlines()) == 1
    assert err.startswith(expected)


@pytest.mark.parametrize(
    "value", ["high", "high=a lot", "=5"], ids=["without value", "not a number", "without name"]
)
def test_a_priority_class_must_be_name_equals_value(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    err = render_error(capsys, "-f", str(PI), "--priority-class", value)
    assert len(err.splitlines()) == 1
    assert err.startswith(f"mpi-operator render: --priority-class '{value}': expected NAME=VALUE")


@pytest.mark.parametrize("flag", ["--version", "-version"])
def test_version(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    assert main([flag]) == 0
    assert capsys.readouterr().out == f"mpi-operator {__version__}\n"


def test_an_unknown_command_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rendr", "-f", str(PI)]) == 2
    assert capsys.readouterr().err.startswith("mpi-operator: unknown command 'rendr'")


@pytest.mark.parametrize("flag", ["--help", "-help", "-h"])
def test_help_answers_to_go_and_posix_spellings(
    capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    assert main([flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mpi-operator [--help] [--version]")
    options = out.split("\noptions:\n", 1)[1].split("\n\n", 1)[0].split()
    assert options[:1] == ["--help"] and "--version" in options
    assert not {"-h", "-h,", "-help", "-version"} & set(options)


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "render" in capsys.readouterr().out
    assert main(["render", "--help"]) == 0
    assert "--gang-scheduling" in capsys.readouterr().out


def test_the_installed_console_script() -> None:
    script = Path(sys.executable).parent / "mpi-operator"
    assert script.exists(), "install the project first: make venv"
    result = subprocess.run(
        [str(script), "render", "-f", str(PI), "--gang-scheduling", "volcano"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("---\n")
    kinds = [doc["kind"] for doc in yaml.safe_load_all(result.stdout)]
    assert kinds == ["Service", "ConfigMap", "Secret", "PodGroup", "Pod", "Pod", "Job"]


def test_a_job_without_a_uid_gets_a_stable_one(capsys: pytest.CaptureFixture[str]) -> None:
    # The API server refuses an ownerReference with an empty uid; a manifest has no uid.
    def owner_uids() -> set[str]:
        code, objects, _ = render(capsys, "-f", str(PI))
        assert code == 0
        return {ref["uid"] for obj in objects for ref in obj["metadata"]["ownerReferences"]}

    first = owner_uids()
    assert len(first) == 1 and "" not in first
    assert owner_uids() == first


def test_a_control_character_is_placed_by_line_and_column(
    capsys: pytest.CaptureFixture[str], stdin: Any
) -> None:
    stdin("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\r\nmetadata:\n  name: a\x01b\n")
    assert render_error(capsys, "-f", "-") == (
        "mpi-operator render: <stdin>: not valid YAML: unacceptable character #x0001: "
        "control characters are not allowed (line 4, column 10)\n"
    )


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param("[{name: 1}]", "env[0].name: must be a string", id="name a number"),
        pytest.param("[1]", "env[0]: must be an object", id="entry a number"),
        pytest.param("[{value: x}]", "env[0].name: is required", id="no name"),
        pytest.param(
            "[{name: A, value: 5}]", "env[0].value: must be a string", id="value a number"
        ),
    ],
)
def test_env_entries_are_checked_against_the_pod_schema(
    capsys: pytest.CaptureFixture[str], stdin: Any, env: str, expected: str
) -> None:
    job = pi_job()
    role(job, "Worker")["template"]["spec"]["containers"][0]["env"] = yaml.safe_load(env)
    stdin(yaml.safe_dump(job))
    worker = "spec.mpiReplicaSpecs[Worker].template.spec.containers[0]"
    assert render_error(capsys, "-f", "-") == f"{worker}.{expected}\n"


def test_a_reader_that_goes_away_ends_render_quietly(tmp_path: Path) -> None:
    """``render ... | head -1``: no traceback, the shell's exit code for a broken pipe."""
    # Far more output than a pipe holds, so the writes must meet the closed pipe.
    manifest = tmp_path / "big.yaml"
    manifest.write_text(yaml.safe_dump(MPIJobWrapper("big").workers(500).obj()))
    done = subprocess.run(
        f"{sys.executable} -m mpi_operator render -f {manifest} | head -c 1 >/dev/null;"
        ' echo "${PIPESTATUS[0]}"',
        shell=True,
        executable="/bin/bash",
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert (done.stdout.strip(), done.stderr) == ("141", "")


# -- input beyond the size limit: refused after reading at most the limit ---------------------

LIMIT = MAX_BYTES
# Reading at most the limit (as text, with the decoder's buffers) stays far below this.
MEMORY_BOUND = 64 * 1024 * 1024


def refused_within_memory(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The error line of a refused ``render``, which must not have held MEMORY_BOUND bytes."""
    tracemalloc.start()
    try:
        err = render_error(capsys, *argv)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND
    return err


def test_a_file_beyond_the_limit_is_refused_by_its_size_unread(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as file:
        file.truncate(1024**3)  # sparse: a gibibyte of zeros on no disk
    assert refused_within_memory(capsys, "-f", str(huge)) == (
        f"mpi-operator render: {huge}: is {1024**3} bytes; a manifest may have at most {LIMIT}\n"
    )


def test_a_pipe_that_does_not_end_is_refused_once_past_the_limit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    written = []

    def write_until_the_reader_leaves() -> None:
        # Bounded only so that a reader reading it all cannot hang the tests.
        chunk = b"# comment\n" * 100_000
        with fifo.open("wb") as pipe:
            for _ in range(256 * 1024 * 1024 // len(chunk)):
                try:
                    pipe.write(chunk)
                except BrokenPipeError:
                    return
                written.append(len(chunk))

    writer = threading.Thread(target=write_until_the_reader_leaves, daemon=True)
    writer.start()
    try:
        err = refused_within_memory(capsys, "-f", str(fifo))
    finally:
        writer.join(60)
    assert err == (
        f"mpi-operator render: {fifo}: is more than {LIMIT} bytes; "
        f"a manifest may have at most {LIMIT}\n"
    )
    assert sum(written) < 2 * LIMIT


def test_endless_standard_input_is_refused_once_past_the_limit() -> None:
    done = subprocess.run(
        f"yes | {sys.executable} -m mpi_operator render -f -",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"mpi-operator render: <stdin>: is more than {LIMIT} bytes; "
        f"a manifest may have at most {LIMIT}\n"
    )


def test_a_text_stream_in_place_of_standard_input_is_read_within_the_limit_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A program that runs main in process may put a text stream, with no bytes under it, there.
    monkeypatch.setattr(sys, "stdin", io.StringIO("é" * MAX_BYTES))
    assert render_error(capsys, "-f", "-") == (
        f"mpi-operator render: <stdin>: is {2 * MAX_BYTES} bytes; "
        f"a manifest may have at most {MAX_BYTES}\n"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("#" * (MAX_BYTES + 1)))
    assert render_error(capsys, "-f", "-") == (
        f"mpi-operator render: <stdin>: is more than {MAX_BYTES} bytes; "
        f"a manifest may have at most {MAX_BYTES}\n"
    )


def pi_naming(account: str, namespace: str = "default", replica_type: str = "Worker") -> str:
    job = pi_job()
    job["metadata"]["namespace"] = namespace
    role(job, replica_type)["template"]["spec"]["serviceAccountName"] = account
    return yaml.safe_dump(job)


WORKER_ACCOUNT = "spec.mpiReplicaSpecs[Worker].template.spec.serviceAccountName"


@pytest.mark.parametrize(
    ("job", "argv", "path"),
    [
        pytest.param(pi_naming("pi-launcher"), [], WORKER_ACCOUNT, id="a launcher's account"),
        pytest.param(
            pi_naming("x-launcher", replica_type="Launcher"),
            ["--operator-account", ""],
            "spec.mpiReplicaSpecs[Launcher].template.spec.serviceAccountName",
            id="a launcher's account in the v2beta1 launcher",
        ),
        pytest.param(
            pi_naming("mpi-operator", "mpi-operator"),
            [],
            WORKER_ACCOUNT,
            id="the standard install's operator account",
        ),
        pytest.param(
            pi_naming("runner", "ops"),
            ["--operator-account", "ops/runner"],
            WORKER_ACCOUNT,
            id="the operator account given",
        ),
    ],
)
def test_render_refuses_a_template_naming_a_reserved_account(
    capsys: pytest.CaptureFixture[str], stdin: Any, job: str, argv: list[str], path: str
) -> None:
    stdin(job)
    [line] = render_error(capsys, "-f", "-", *argv).splitlines()
    assert line.startswith(f"{path}: ")
    assert "is reserved" in line


@pytest.mark.parametrize(
    ("job", "argv"),
    [
        pytest.param(pi_naming("mpi-operator", "team-a"), [], id="another namespace"),
        pytest.param(
            pi_naming("mpi-operator", "mpi-operator"),
            ["--operator-account", "ops/runner"],
            id="another operator account given",
        ),
        pytest.param(
            pi_naming("mpi-operator", "mpi-operator"),
            ["--operator-account", ""],
            id="the operator account unknown",
        ),
    ],
)
def test_render_accepts_the_operators_account_name_elsewhere(
    capsys: pytest.CaptureFixture[str], stdin: Any, job: str, argv: list[str]
) -> None:
    stdin(job)
    code, objects, err = render(capsys, "-f", "-", *argv)
    assert (code, err) == (0, "")
    workers = [obj for obj in objects if obj["kind"] == "Pod"]
    assert [pod["spec"]["serviceAccountName"] for pod in workers] == ["mpi-operator"] * 2


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("mpi-operator", "expected NAMESPACE/NAME"),
        ("Ops/runner", "a namespace"),
        ("ops/runner/x", "a ServiceAccount name"),
        ("ops/", "a ServiceAccount name"),
    ],
    ids=["without namespace", "namespace not a label", "name with a slash", "empty name"],
)
def test_an_operator_account_must_be_namespace_slash_name(
    capsys: pytest.CaptureFixture[str], value: str, problem: str
) -> None:
    err = render_error(capsys, "-f", str(PI), "--operator-account", value)
    assert len(err.splitlines()) == 1
    assert err.startswith(f"mpi-operator render: --operator-account '{value}': {problem}")
