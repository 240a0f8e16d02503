"""The operator's flags: upstream's names and spellings, defaults, and refused values."""

from __future__ import annotations

import argparse

import pytest

from mpi_operator.operator.options import (
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
