"""The operator's flags: upstream's names and spellings, defaults, and refused values."""

from __future__ import annotations

import argparse

import pytest

from mpi_operator.operator.options import Options, OptionsError, add_operator_flags, options_from


def parse(*argv: str) -> Options:
    parser = argparse.ArgumentParser()
    add_operator_flags(parser)
    return options_from(parser.parse_args(list(argv)))


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
