"""Shared pytest setup: Ray on the loopback address; one Ray cluster that training runs attach to; the toy testbed's
``ci`` build and the benchmark trained on it, shared by the toy and quickstart tests; a user's copy of
``bots_trainer.yaml`` with hyperparameters set in the file; GPU-marked tests are skipped without a CUDA GPU (CI has
none)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from bots_verl.verl_cpu.cluster import use_loopback

# every Ray cluster the tests start (in this process or in the processes they spawn) listens on 127.0.0.1 only
use_loopback()


@pytest.fixture(scope="session")
def ray_attach():
    """The environment that attaches a training run to the session's local Ray cluster, once it is idle.

    Starting and stopping a cluster costs every ``python -m bots_verl.main`` run 5-30 s on 2 cores; runs that check
    neither Ray's own start-up nor a killed cluster attach to one shared cluster instead
    (:class:`~bots_verl.verl_cpu.cluster.SharedRayCluster`, as the toy benchmark's runs do). It serves one run at a
    time: each call waits until the previous run's actors are gone. Use: ``env = {**os.environ, **ray_attach()}``.
    """
    from bots_verl.verl_cpu.cluster import SharedRayCluster
    from bots_verl.verl_cpu.launch import MIN_RAY_CPUS

    # Ray's workers inherit the head's environment (a run adds the CPU backend's variables through its runtime_env)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        env.setenv("TOKENIZERS_PARALLELISM", "false")
        # no idle workers started ahead of need, no metrics export: an idle cluster then takes 1.3 CPU s a minute
        # instead of 2.8 (measured over 60 s), which the other test worker gets; a fit's own CPU is unchanged
        # (two 2-step toy fits: 125.6 against 126.7 CPU s)
        env.setenv("RAY_enable_worker_prestart", "0")
        env.setenv("RAY_prestart_worker_first_driver", "0")
        env.setenv("RAY_enable_metrics_collection", "0")
        # two logical GPUs: the actor's, and a separate_async run's standalone rollout
        cluster = SharedRayCluster(num_cpus=MIN_RAY_CPUS, num_gpus=2).start()

    def attach() -> dict[str, str]:
        cluster.wait_idle()
        return cluster.env

    try:
        yield attach
    finally:
        cluster.stop()


@pytest.fixture()
def yaml_config(tmp_path) -> Callable[..., Any]:
    """``compose(hparams, overrides)``: the config ``python -m bots_verl.main --config-path <dir> --config-name recipe
    <overrides>`` composes from a copy of ``bots_trainer.yaml`` whose declared ``bots.hparams`` keys in ``hparams``
    are set in the file (a recipe yaml: hydra includes ``bots_trainer`` only as the primary config)."""
    from hydra import compose, initialize_config_dir

    def compose_it(hparams: Mapping[str, Any], overrides: Sequence[str] = ()) -> Any:
        text = (Path(__file__).parents[1] / "bots_verl/config/bots_trainer.yaml").read_text()
        for key, value in hparams.items():
            text, found = re.subn(rf"^(    {key}:) null$", rf"\g<1> {value}", text, flags=re.MULTILINE)
            assert found == 1, f"bots.hparams.{key} is not declared null in bots_trainer.yaml"
        folder = tmp_path / "recipe_yaml"
        folder.mkdir(exist_ok=True)
        (folder / "recipe.yaml").write_text(text)
        with initialize_config_dir(config_dir=str(folder), version_base=None):
            return compose(config_name="recipe", overrides=list(overrides))

    return compose_it


@pytest.fixture(scope="session")
def ci_data(tmp_path_factory) -> Path:
    """``python -m bots_verl.toy.prepare --profile ci --jobs 2`` (every stage, calibration included) in a fresh
    directory, through the command line (``tests/toy/test_prepare.py`` checks what it built).

    Read-only for its users: each writes its runs beside it, under ``<parent>/runs/<arm>_s0``, or copies it.
    """
    from bots_verl.toy.prepare import main

    out = tmp_path_factory.mktemp("toy_ci") / "data"
    # two jobs: warm-ups in spawned worker processes, the reference collections as `python -m reference_eval` children
    assert main(["--out", str(out), "--profile", "ci", "--jobs", "2", "--seed", "0"]) == 0
    return out


@pytest.fixture(scope="session")
def bench(tmp_path_factory, ci_data) -> tuple[Path, dict]:
    """The toy benchmark's ``ci`` profile run on a copy of :func:`ci_data`: real GRPO training of ``random`` and
    ``bots`` in verl's trainer, evaluation, tables and summary; ``(benchmark directory, summary)``.

    Read-only for its users (``tests/toy/test_benchmark.py`` checks the benchmark; ``tests/test_quickstart.py`` reports
    on its two runs): a test that changes it works on a copy.
    """
    import shutil

    from bots_verl.toy.arms import PROFILES
    from bots_verl.toy.benchmark import run_benchmark

    root = tmp_path_factory.mktemp("toybench")
    # the session's ci build: the benchmark's prepare finds every stage done
    shutil.copytree(ci_data, root / "data")
    summary = run_benchmark(PROFILES["ci"], root, prepare_jobs=1, timeout=900)
    return root, summary


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _group(nodeid: str) -> str:
    """The share of the suite one pytest-xdist worker runs whole: a test's module, so that module-scoped fixtures (the
    shared real ``fit()`` runs) train once; the toy tests and the quickstart's are one share, so the session's
    ``ci_data`` build (about 30 s) and ``bench`` runs are made once."""
    path = nodeid.split("::", 1)[0]
    return "tests/toy" if path.startswith("tests/toy/") or path == "tests/test_quickstart.py" else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """With ``--dist loadscope`` (``make test``), hand whole shares (:func:`_group`) to the workers, in the order
    :func:`pytest_collection_modifyitems` left them.

    Not ``--dist loadgroup`` with ``xdist_group`` marks: pytest-xdist 3.8 tags the marked tests by rewriting
    ``item._nodeid``, which pytest 9 no longer reads, so every marked test is scheduled alone.
    """
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharesInOrder(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    # loadscope sorts its shares by test count unless told not to; the order below puts the long ones first
    config.option.loadscopereorder = False
    return SharesInOrder(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # shares that hold a slow test (the real fit() runs, 1-3 min each) first, so that no worker is left with one at
    # the end while the other idles; the sort is stable, so the order within a share is kept
    # markers, not keywords: keywords also hold the names of the folders above (a checkout in a folder named gpu)
    slow = {_group(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: _group(item.nodeid) not in slow)
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
