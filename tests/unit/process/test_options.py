"""The operator's flags: upstream's names and spellings, defaults, and refused values."""

from __future__ import annotations

import argparse
import re
from typing import Final

import pytest

from mpi_operator.api import constants as c
from mpi_operator.cli import main
from mpi_operator.operator.options import (
    API_CLIENT,
    COMPATIBILITY,
    JOBS,
    KLOG_FLAGS,
    LEADER_ELECTION,
    LOGGING,
    MONITORING,
    SCHEDULING,
    Options,
    OptionsError,
    add_operator_flags,
    ignored_flags,
    options_from,
)


def parse(*argv: str) -> Options:
    parser = argparse.ArgumentParser()
    add_operator_flags(parser)
    return options_from(parser.parse_args(list(argv)))


def ignored(*argv: str) -> tuple[str, ...]:
    parser = argparse.ArgumentParser()
    add_operator_flags(parser)
    return ignored_flags(parser.parse_args(list(argv)))


def test_defaults_are_upstreams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEFLOW_NAMESPACE", raising=False)
    assert parse() == Options()
    assert (Options().threadiness, Options().kube_api_qps, Options().kube_api_burst) == (2, 5, 10)
    assert (Options().controller_queue_rate_limit, Options().controller_queue_burst) == (10, 100)
    assert Options().lock_namespace == "mpi-operator"


@pytest.mark.parametrize(
    "argv",
    [
        ["-kubeConfig", "/k", "-threadiness", "4", "-gang-scheduling", "volcano"],
        ["--kubeconfig=/k", "--threadiness=4", "--gang-scheduling=volcano"],
        ["--kubeConfig", "/k", "-threadiness=4", "--gang-scheduling", "volcano"],
    ],
)
def test_go_style_single_dash_and_double_dash_flags_mean_the_same(argv: list[str]) -> None:
    options = parse(*argv)
    assert (options.kubeconfig, options.threadiness, options.gang_scheduling) == (
        "/k",
        4,
        "volcano",
    )


def test_the_watched_namespace_defaults_to_kubeflow_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBEFLOW_NAMESPACE", "team-a")
    assert parse().namespace == "team-a"
    assert parse("--namespace", "team-b").namespace == "team-b"


@pytest.mark.parametrize(
    ("environ", "account"),
    [
        ({"POD_NAMESPACE": "ops", "POD_SERVICE_ACCOUNT": "runner"}, ("ops", "runner")),
        ({"POD_NAMESPACE": "ops"}, None),
        ({"POD_SERVICE_ACCOUNT": "runner"}, None),
        ({"POD_NAMESPACE": "ops", "POD_SERVICE_ACCOUNT": ""}, None),
        ({}, None),
    ],
    ids=["both set", "no account", "no namespace", "empty account", "out of the cluster"],
)
def test_the_operators_account_comes_from_the_downward_api(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], account: tuple[str, str] | None
) -> None:
    for name in ("POD_NAMESPACE", "POD_SERVICE_ACCOUNT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert Options().static_facts().operator_account == account


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--threadiness=0"], "--threadiness: must be at least 1"),
        (["--monitoring-port=70000"], "--monitoring-port: must be a port number"),
        (["--controller-queue-rate-limit=0"], "--controller-queue-rate-limit: must be positive"),
        (["--lock-namespace="], "--lock-namespace: must not be empty"),
    ],
)
def test_values_that_cannot_work_are_refused_by_flag_name(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        parse(*argv)


@pytest.mark.parametrize(("text", "value"), [("false", False), ("0", False), ("true", True)])
def test_leader_election_can_be_turned_off_for_local_runs(text: str, value: bool) -> None:
    assert parse(f"--leader-elect={text}").leader_elect is value


def test_upstreams_own_deployment_arguments_start_the_operator() -> None:
    """kubeflow/mpi-operator v0.8.2's manifests/base/deployment.yaml passes -alsologtostderr."""
    assert parse("-alsologtostderr") == parse()
    assert ignored("-alsologtostderr") == ("-alsologtostderr=true",)


@pytest.mark.parametrize(
    ("argv", "verbosity", "ignored_ones"),
    [
        (["-v=2"], 2, ()),
        (["--v", "4"], 4, ()),
        (["-logtostderr=false", "-v=1"], 1, ("-logtostderr=false",)),
        (
            ["-stderrthreshold", "INFO", "-log_dir=/var/log"],
            0,
            ("-log_dir=/var/log", "-stderrthreshold=INFO"),
        ),
        (["-vmodule=sync=4,queue=2"], 0, ("-vmodule=sync=4,queue=2",)),
        (
            ["--skip_headers", "-log_file_max_size=1800"],
            0,
            ("-log_file_max_size=1800", "-skip_headers=true"),
        ),
    ],
)
def test_klogs_flags_are_accepted_and_only_v_acts(
    argv: list[str], verbosity: int, ignored_ones: tuple[str, ...]
) -> None:
    assert (parse(*argv).verbosity, ignored(*argv)) == (verbosity, ignored_ones)


@pytest.mark.parametrize(
    ("argv", "elect"),
    [
        ([], True),
        (["--leader-elect"], True),
        (["-leader-elect=false"], False),
        (["--leader-elect", "true"], True),
    ],
)
def test_a_boolean_flag_alone_is_true_as_in_go(argv: list[str], elect: bool) -> None:
    assert parse(*argv).leader_elect is elect


def test_a_klog_flag_with_a_bad_value_is_refused() -> None:
    with pytest.raises(SystemExit):
        parse("-log_file_max_size=big")


@pytest.mark.parametrize(
    ("argv", "value"),
    [([], True), (["--failure-log-tail=false"], False), (["-failure-log-tail", "true"], True)],
)
def test_failure_messages_quote_the_log_tail_unless_turned_off(
    argv: list[str], value: bool
) -> None:
    assert parse(*argv).failure_log_tail is value


# -- --help ---------------------------------------------------------------------------------

# Each group's flags, in the order --help lists them, and the default it shows for each.
HELP: dict[str, dict[str, str]] = {
    JOBS: {
        "--namespace string": "$KUBEFLOW_NAMESPACE, else all namespaces",
        "--threadiness int": "2",
        "--controller-queue-rate-limit float": "10.0",
        "--controller-queue-burst int": "100",
        "--cluster-domain string": "none",
        "--mpi-kubectl-delivery-image string": c.DEFAULT_KUBECTL_DELIVERY_IMAGE,
        "--failure-log-tail [bool]": "true",
    },
    SCHEDULING: {"--gang-scheduling string": "none"},
    API_CLIENT: {
        "--master string": "the kubeconfig's",
        "--kubeconfig string": "$KUBECONFIG, else the in-cluster service account",
        "--kube-api-qps float": "5.0",
        "--kube-api-burst int": "10",
    },
    LEADER_ELECTION: {"--leader-elect [bool]": "true", "--lock-namespace string": "mpi-operator"},
    MONITORING: {
        "--monitoring-port int": "0",
        "--health-port int": "8080",
        "--bind-address string": "0.0.0.0",
    },
    LOGGING: {"--v int": "0", "--log-format string": "text"},
}


def help_text(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["--help"]) == 0
    return capsys.readouterr().out


def help_sections(text: str) -> dict[str, str]:
    """The help's sections by title (a line ``title:`` at the margin), without the usage."""
    parts = re.split(r"^(\S[^\n]*):\n", text, flags=re.MULTILINE)[1:]
    return dict(zip(parts[::2], parts[1::2], strict=True))


def test_help_lists_each_flag_once_in_its_group_with_its_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sections = help_sections(help_text(capsys, monkeypatch))
    assert list(sections) == ["options", *HELP, COMPATIBILITY, "commands"]
    for title, flags in HELP.items():
        body = sections[title]
        shown = re.findall(r"^  (-\S+(?: \S+)?)", body, flags=re.MULTILINE)
        assert shown == list(flags), title
        words = " ".join(body.split())
        for flag, default in flags.items():
            described = words.split(f"{flag} ", 1)[1].split(" --", 1)[0]
            assert described.endswith(f"(default: {default})"), (flag, described)


def test_help_shows_no_alias_and_names_the_accepted_spellings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = help_text(capsys, monkeypatch)
    flags = "".join(help_sections(text)[title] for title in ["options", *HELP])
    invocations = re.findall(r"^  (-\S+)", flags, flags=re.MULTILINE)
    assert all(flag.startswith("--") for flag in invocations), invocations
    assert len(invocations) == len(set(invocations))
    assert "--kubeConfig" not in text and "-kubeConfig is --kubeconfig" in " ".join(text.split())
    compatibility = " ".join(help_sections(text)[COMPATIBILITY].split())
    assert all(f"-{name}" in compatibility for name in KLOG_FLAGS)


# A value for every option that differs from its default, as each spelling takes it.
SAMPLES: Final[dict[str, tuple[str, object]]] = {
    "namespace": ("team-a", "team-a"),
    "threadiness": ("7", 7),
    "controller_queue_rate_limit": ("2.5", 2.5),
    "controller_queue_burst": ("9", 9),
    "cluster_domain": ("cluster.local", "cluster.local"),
    "mpi_kubectl_delivery_image": ("example.com/kubectl:1", "example.com/kubectl:1"),
    "failure_log_tail": ("false", False),
    "gang_scheduling": ("volcano", "volcano"),
    "master": ("https://api:6443", "https://api:6443"),
    "kubeconfig": ("/k", "/k"),
    "kube_api_qps": ("50", 50.0),
    "kube_api_burst": ("70", 70),
    "leader_elect": ("false", False),
    "lock_namespace": ("locks", "locks"),
    "monitoring_port": ("9100", 9100),
    "health_port": ("9101", 9101),
    "bind_address": ("127.0.0.1", "127.0.0.1"),
    "verbosity": ("3", 3),
    "log_format": ("json", "json"),
}


def spellings() -> dict[str, list[str]]:
    """Every spelling of each operator flag (klog's aside), by destination."""
    parser = argparse.ArgumentParser(add_help=False)
    add_operator_flags(parser)
    found: dict[str, list[str]] = {}
    for action in parser._actions:
        if not action.dest.startswith("klog_"):
            found.setdefault(action.dest, []).extend(action.option_strings)
    return found


def test_every_flag_has_a_sample() -> None:
    assert set(spellings()) == set(SAMPLES)


@pytest.mark.parametrize(
    ("dest", "spelling"),
    [(dest, spelling) for dest, names in spellings().items() for spelling in names],
)
def test_every_spelling_still_parses(
    monkeypatch: pytest.MonkeyPatch, dest: str, spelling: str
) -> None:
    monkeypatch.delenv("KUBEFLOW_NAMESPACE", raising=False)
    text, value = SAMPLES[dest]
    assert getattr(Options(), dest) != value
    assert getattr(parse(f"{spelling}={text}"), dest) == value
    assert getattr(parse(spelling, text), dest) == value


def test_upstreams_spellings_stay_accepted() -> None:
    names = {spelling for names in spellings().values() for spelling in names}
    assert {"-kubeConfig", "--kubeConfig", "-threadiness", "-monitoring-port", "-v"} <= names
    assert {"-gang-scheduling", "-lock-namespace", "-mpi-kubectl-delivery-image"} <= names


def test_an_unknown_log_format_is_refused_by_flag_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--log-format=xml"]) == 2
    assert "--log-format: invalid choice: 'xml'" in capsys.readouterr().err
    with pytest.raises(OptionsError, match="--log-format: must be one of text, json"):
        options_from(argparse.Namespace(**{**vars(raw()), "log_format": "xml"}))


def raw(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_operator_flags(parser)
    return parser.parse_args(list(argv))
