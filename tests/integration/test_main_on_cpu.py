"""``python -m bots_verl.main``: hydra composition, verl's validate_config, the dry run and config errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from integration_helpers import ROOT, base_overrides, compose, make_pool, save_bots_data_pt

from bots_verl.integration.hooks.task_runner import use_run_log
from bots_verl.main import check_config, run


def _main(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "RAY_ADDRESS": "", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "bots_verl.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture()
def pool(tmp_path):
    path = tmp_path / "train.parquet"
    make_pool(path, 12)
    return str(path)


def test_cfg_job_composes_with_overrides_and_dry_run_passes(pool, tokenizer_dir):
    overrides = base_overrides(pool, tokenizer_dir, "bots.selector=mopps", "+bots.hparams.lam=0.2")
    job = _main("--cfg", "job", *overrides)
    assert job.returncode == 0, job.stderr[-2000:]
    assert "selector: mopps" in job.stdout and "lam: 0.2" in job.stdout
    assert "dataloader_num_workers: 0" in job.stdout and "trainer_mode: sync" in job.stdout

    dry = _main(*overrides, "bots.dry_run=true", "trainer.total_training_steps=3")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "BOTS dry run: config OK" in dry.stdout and "bots.selector=mopps" in dry.stdout
    # hydra's task overrides reach the driver: the value set on the command line is printed as theirs
    assert "  hparams: override lam=0.2; default rho=0.0 " in dry.stdout


def test_bad_selector_fails_with_clear_message(pool, tokenizer_dir):
    bad = _main(*base_overrides(pool, tokenizer_dir, "bots.selector=bogus", "bots.dry_run=true"))
    assert bad.returncode != 0
    assert "bots.selector='bogus' is not a registered selector" in bad.stderr


def test_dry_run_warns_for_paths_only_on_the_cluster(caplog):
    cfg = compose(base_overrides("/cluster/data/train.parquet", "/cluster/models/qwen", "bots.dry_run=true"))
    bots = check_config(cfg).section
    assert bots.dry_run and bots.reference_columns == ["weak_pass_rate", "strong_pass_rate"]
    assert "does not exist here" in caplog.text and "not a local path" in caplog.text


@pytest.mark.parametrize(
    "override, message",
    [
        ("bots.reference_columns=[weak_pass_rate,missing_col]", "has no column 'missing_col'"),
        ("bots.task_id_field=uid_col", "has no column 'uid_col'"),
        ("data.dataloader_num_workers=2", "dataloader_num_workers"),
        ("trainer.v1.trainer_mode=fully_async", "trainer_mode"),
        ("+bots.hparams.lamb=0.1", "lamb"),
        ("bots.success.rule=maybe", "bots.success.rule"),
        ("bots.reference_columns=[]", "reference"),
        ("bots.seed=-1", "bots.seed"),
        ("data.train_batch_size=3", "train_batch_size"),
        # a random subset without a seed differs in every process, so a resume would always be refused
        ("data.train_max_samples=6", "data.seed"),
        ("bots.replay_poll_interval=-1", "replay_poll_interval"),
        # issue 47, item 4: "abc" failed 139 s into a run naming no key, -1 trained no step and exited 0
        ("trainer.total_training_steps=abc", "trainer.total_training_steps='abc' must be a positive integer"),
        ("trainer.total_training_steps=-1", "trainer.total_training_steps=-1 must be a positive integer"),
        # issue 47, item 5: checked in the rollout's Ray worker only, 80 s or more into a run
        (
            "actor_rollout_ref.rollout.checkpoint_engine.backend=cpu_gloo "
            "+actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.cpu_gloo.timeout_s=-5",
            "cpu_gloo.timeout_s=-5 must be a positive number of seconds",
        ),
        ("actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=0", "bucket_megabytes=0"),
        # issue 47, items 8 and 9
        ("+bots.hparams.lam=true", "hyperparameter 'lam' is a number"),
        ("+bots.hparams.lam='0.1'", "write it unquoted, e.g. \\+bots.hparams.lam=0.1"),
    ],
)
def test_malformed_config_is_a_value_error(pool, tokenizer_dir, override, message):
    cfg = compose(base_overrides(pool, tokenizer_dir, *override.split()))
    with pytest.raises(ValueError, match=message):
        check_config(cfg)


def test_verls_rollout_skip_is_refused_because_it_credits_the_wrong_tasks(pool, tokenizer_dir):
    """skip.rollout_tq trains on trajectories cached by an earlier run instead of the tasks BOTS selected."""
    cfg = compose(base_overrides(pool, tokenizer_dir, "skip.rollout_tq.enable=true", "skip.rollout_tq.steps=[1]"))
    with pytest.raises(ValueError) as refused:
        check_config(cfg)
    message = str(refused.value)
    assert "skip.rollout_tq.enable=true" in message and "wrong tasks" in message
    assert "skip.rollout_tq.enable=false" in message
    check_config(compose(base_overrides(pool, tokenizer_dir, "skip.rollout_tq.enable=false")))


@pytest.mark.parametrize("dry_run", [True, False])
def test_verl_drift_is_refused_at_run_start_naming_the_version_and_the_changed_pins(
    pool, tokenizer_dir, monkeypatch, capsys, dry_run
):
    """Another verl, a changed pinned verl source or a dependency outside its tested range stops the dry run and the
    run before Ray starts, naming what is needed."""
    import verl
    import verl.trainer.main_ppo

    from bots_verl.integration.safety import verl_pins

    cfg = compose(base_overrides(pool, tokenizer_dir, f"bots.dry_run={str(dry_run).lower()}"))
    target = "verl.trainer.ppo.v1.replay_buffer:ReplayBuffer._clear_groups"
    pinned, depends = verl_pins.PINS[target]
    installed = verl_pins._installed_version
    with monkeypatch.context() as patched:
        patched.setattr(verl, "__version__", "0.9.2")
        patched.setitem(verl_pins.PINS, target, ("0" * 64, depends))
        patched.setattr(verl_pins, "_installed_version", lambda d: "0.2.0" if d == "TransferQueue" else installed(d))
        patched.setattr(verl.trainer.main_ppo, "run_ppo", lambda *a, **k: pytest.fail("Ray started"))
        with pytest.raises(verl_pins.VerlDriftError) as refused:
            run(cfg)
    message = str(refused.value)
    assert "verl 0.9.1 is needed, 0.9.2 is installed" in message
    assert f"{target} changed since verl 0.9.1; re-check: {depends}" in message
    assert "TransferQueue>=0.1.10,<0.2 is needed, 0.2.0 is installed" in message
    assert "pip install 'verl[verl-core]==0.9.1'" in message
    assert "BOTS dry run" not in capsys.readouterr().out
    if dry_run:  # the installed verl passes
        run(cfg)
        assert "BOTS dry run: config OK" in capsys.readouterr().out


def test_dry_run_refuses_a_resume_whose_posterior_was_built_for_other_hparams_or_references(
    pool, tokenizer_dir, tmp_path, capsys
):
    """The driver compares what it knows without the dataset (selector, hyperparameters, success rule, reference column
    names) with the checkpoint's fingerprint, so the dry run already says what the trainer would refuse."""
    from bots_verl.core.settings import effective_hparams
    from bots_verl.integration.safety.fingerprint import run_fingerprint

    ckpt = tmp_path / "ckpt"
    columns = ["weak_pass_rate", "strong_pass_rate"]
    fingerprint = run_fingerprint(
        task_ids=None,
        prompts_sha256=None,
        reference_columns=columns,
        reference=None,
        selector="bots",
        hparams=effective_hparams("bots", {}),
        success_rule="auto",
        success_threshold=0.0,
    )
    save_bots_data_pt(ckpt / "global_step_2", 12, fingerprint)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")

    def dry_run(*extra):
        overrides = [f"trainer.default_local_dir={ckpt}", "bots.dry_run=true", *extra]
        run(compose(base_overrides(pool, tokenizer_dir, *overrides)))

    dry_run()
    assert "BOTS dry run: config OK" in capsys.readouterr().out
    with pytest.raises(ValueError) as refused:
        dry_run("+bots.hparams.lam=0.3")
    message = str(refused.value)
    assert f"resuming from {ckpt / 'global_step_2'}" in message
    assert "hparams: lam 0.1 -> 0.3 (accept with bots.resume.accept_changed=[hparams])" in message
    dry_run("+bots.hparams.lam=0.3", "bots.resume.accept_changed=[hparams]")
    with pytest.raises(ValueError, match=r"reference_columns: names .*accept_changed=\[reference_columns\]"):
        dry_run("bots.reference_columns=[strong_pass_rate,weak_pass_rate]")
    # issue 59: the success rule turns a reward into the posterior's success; it resumed without a word
    with pytest.raises(ValueError) as refused:
        dry_run("bots.success.rule=acc")
    assert (
        "success: rule 'auto' threshold 0.0 -> rule 'acc' threshold 0.0 (accept with bots.resume.accept_changed="
        "[success])" in str(refused.value)
    )
    dry_run("bots.success.rule=acc", "bots.resume.accept_changed=[success]")
    with pytest.raises(ValueError, match="bots.resume.accept_changed must be a list of: pool"):
        dry_run("bots.resume.accept_changed=[everything]")
    save_bots_data_pt(ckpt / "global_step_2", 12, None)  # a checkpoint written before fingerprints
    with pytest.raises(ValueError, match=r"accept_changed=\[missing_fingerprint\]"):
        dry_run()
    dry_run("bots.resume.accept_changed=[missing_fingerprint]")


def test_task_id_column_and_baselines_validate(pool, tokenizer_dir):
    for selector in ("random", "sequential", "offline_easy2hard", "implicit_only"):
        cfg = compose(base_overrides(pool, tokenizer_dir, f"bots.selector={selector}", "bots.task_id_field=task_id"))
        assert check_config(cfg).selector.name == selector


def test_random_subset_with_a_seed_or_without_shuffle_is_accepted(pool, tokenizer_dir):
    for extra in (["data.train_max_samples=6", "data.seed=3"], ["data.train_max_samples=6", "data.shuffle=false"]):
        check_config(compose(base_overrides(pool, tokenizer_dir, *extra)))


def test_relative_run_log_dir_is_resolved_once_by_the_driver(pool, tokenizer_dir, tmp_path, monkeypatch):
    """The driver resolves ``bots.run_log.dir``; the task runner (a Ray process that may run in another working
    directory) writes metrics.jsonl into that same directory."""
    launch, elsewhere = tmp_path / "launch", tmp_path / "elsewhere"
    launch.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(launch)
    config = compose(base_overrides(pool, tokenizer_dir, "bots.run_log.dir=runs/r1", "bots.dry_run=true"))
    run(config)
    assert config.bots.run_log.dir == str(launch / "runs" / "r1")
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    use_run_log(config)  # what BOTSTaskRunner.run does first
    assert os.environ["VERL_FILE_LOGGER_PATH"] == str(launch / "runs" / "r1" / "metrics.jsonl")


def _old_run_log(run_dir, metrics: str = '{"step": 1, "data": {"x": 1.0}}\n'):
    """A run log an earlier run left: meta.json and metrics.jsonl (with one logged step by default)."""
    run_dir.mkdir(parents=True)
    (run_dir / "meta.json").write_text("{}\n")
    (run_dir / "metrics.jsonl").write_text(metrics)


def _checkpoint(ckpt, step: int = 2):
    """What verl's checkpoint tracker leaves for resume_mode=auto to find."""
    (ckpt / f"global_step_{step}").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))


@pytest.mark.parametrize("resume_mode", ["auto", "disable"])
def test_fresh_run_in_a_run_log_dir_with_logged_steps_is_refused(
    pool, tokenizer_dir, tmp_path, monkeypatch, resume_mode
):
    old = tmp_path / "runs" / "old"
    _old_run_log(old)
    ckpt = tmp_path / "ckpt"
    if resume_mode == "disable":
        _checkpoint(ckpt)  # a checkpoint that this run is told not to resume from
    overrides = [f"bots.run_log.dir={old}", f"trainer.default_local_dir={ckpt}", f"trainer.resume_mode={resume_mode}"]
    config = compose(base_overrides(pool, tokenizer_dir, *overrides, "bots.dry_run=true"))
    with pytest.raises(ValueError) as refused:
        run(config)
    message = str(refused.value)
    assert f"bots.run_log.dir={old} already holds the metrics of an earlier run (metrics.jsonl)" in message
    assert "Pick a new bots.run_log.dir, or delete" in message
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", "unset")
    with pytest.raises(ValueError, match="already holds the metrics of an earlier run"):
        use_run_log(config)  # the task runner refuses too, before moving anything
    assert sorted(p.name for p in old.iterdir()) == ["meta.json", "metrics.jsonl"]
    assert os.environ["VERL_FILE_LOGGER_PATH"] == "unset"


def test_a_resumed_run_continues_its_run_log_and_an_unlogged_dir_is_free(pool, tokenizer_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", "unset")
    resumed = tmp_path / "runs" / "resumed"
    _old_run_log(resumed)
    # a checkpoint on the cluster's storage only: the driver leaves its data.pt to the trainer (a local checkpoint
    # without one is refused here, test_resume_refusals.py), and the run resumes, so it continues its run log
    remote = tmp_path / "cluster_only" / "global_step_2"
    config = compose(
        base_overrides(
            pool,
            tokenizer_dir,
            f"bots.run_log.dir={resumed}",
            "trainer.resume_mode=resume_path",
            f"trainer.resume_from_path={remote}",
        )
    )
    check_config(config)
    use_run_log(config)
    assert sorted(p.name for p in resumed.iterdir()) == ["meta.json", "metrics.part0.jsonl"]
    # an earlier launch that failed before its first step left meta.json and an empty metrics.jsonl: nothing to merge
    unlogged = tmp_path / "runs" / "unlogged"
    _old_run_log(unlogged, metrics="")
    config = compose(
        base_overrides(pool, tokenizer_dir, f"bots.run_log.dir={unlogged}", f"trainer.default_local_dir={tmp_path}/x")
    )
    check_config(config)
    use_run_log(config)
    assert os.environ["VERL_FILE_LOGGER_PATH"] == str(unlogged / "metrics.jsonl")


def _known_answers_file(path, tasks) -> str:
    path.write_text(json.dumps({"format": "bots-known-answers", "version": 1, "tasks": tasks}))
    return str(path)


def test_a_missing_or_malformed_known_answers_file_is_refused_before_ray(pool, tokenizer_dir, tmp_path, monkeypatch):
    """The rollout server reads the file minutes into a run; check_config reads it first (issue 47)."""
    key = "actor_rollout_ref.rollout.custom.known_answers"
    task = {"task_id": 3, "prompt": "what is 1 + 1", "data_source": "math", "responses": ["2"], "correct": [True]}
    good = _known_answers_file(tmp_path / "good.json", [task])
    check_config(compose(base_overrides(pool, tokenizer_dir, f"+{key}={good}")))
    missing = tmp_path / "absent.json"
    with pytest.raises(ValueError, match=f"{key}: known-answers file {missing}: .*No such file"):
        check_config(compose(base_overrides(pool, tokenizer_dir, f"+{key}={missing}")))
    empty = _known_answers_file(tmp_path / "empty.json", [{**task, "responses": []}])
    with pytest.raises(ValueError, match=rf"{key}: known-answers file {empty}: task 0 \(task_id 3\): responses"):
        check_config(compose(base_overrides(pool, tokenizer_dir, f"+{key}={empty}")))
    # a real run's start (no dry run) refuses it too, before Ray is started
    import ray

    # an earlier test of this worker may have left Ray up, so the check is that this run never calls ray.init
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: pytest.fail("ray.init was called"))
    with pytest.raises(ValueError, match=f"known-answers file {empty}: task 0"):
        run(compose(base_overrides(pool, tokenizer_dir, f"+{key}={empty}")))
