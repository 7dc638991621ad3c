"""The CPU bench's accounting of CPU time by process (the figures its profile tables quote)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


def test_cpu_by_process_counts_new_processes_from_zero_and_sums_a_name():
    from bots_verl.speed.cpu_step_time import cpu_by_process

    before = {1: ("python", 10.0), 2: ("ray::WorkerDict", 5.0), 3: ("ray::IDLE", 1.0)}
    after = {
        1: ("python", 10.5),
        2: ("ray::WorkerDict", 7.25),
        3: ("ray::IDLE", 1.5),
        4: ("ray::IDLE", 0.75),  # appeared in between
        5: ("ray::GroupedAgentLoopWorker", 3.0),
    }
    assert cpu_by_process(before, after) == {
        "python": 0.5,
        "ray::WorkerDict": 2.25,
        "ray::IDLE": 1.25,
        "ray::GroupedAgentLoopWorker": 3.0,
    }
    # a pid reused by a younger process (fewer seconds than before) never counts negative
    assert cpu_by_process({7: ("a", 9.0)}, {7: ("b", 2.0)}) == {"b": 0.0}


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("ray::WorkerDict.actor_rollout_update_actor", "ray::WorkerDict"),
        ("ray::BOTSTaskRunner.run", "ray::BOTSTaskRunner"),
        ("ray::IDLE", "ray::IDLE"),
        ("/work/main/.venv/bin/python -m bots_verl.main", "python"),
        ("/usr/lib/ray/gcs_server --log_dir=/tmp", "gcs_server"),
    ],
)
def test_process_names_come_from_ray_titles_or_the_program(title, name):
    from bots_verl.speed.cpu_step_time import _process_name

    assert _process_name(title) == name


def test_tree_cpu_seconds_sees_a_child_that_burns_cpu():
    from bots_verl.speed.cpu_step_time import _tree_cpu_seconds

    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\ntime.sleep(30)",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            used = _tree_cpu_seconds(os.getpid())
            if child.pid in used and used[child.pid][1] >= 0.5:
                break
            assert time.monotonic() < deadline, used.get(child.pid)
            time.sleep(0.1)
        assert used[child.pid][0].startswith("python")
        assert os.getpid() in used
    finally:
        child.kill()
        child.wait()
