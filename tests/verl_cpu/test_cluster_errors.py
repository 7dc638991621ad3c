"""Why a shared Ray cluster's head failed reaches the user (issue 34), without starting Ray: a stand-in ``ray``
package on ``PYTHONPATH`` records how the head calls ``ray.init`` and fails the way Ray does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bots_verl.verl_cpu.cluster import SharedRayCluster

_FAKE_RAY = """
def init(**kwargs):
    raise ConnectionError(
        "fake ray: could not attach to the address in ray_current_cluster "
        f"(ray.init called with {sorted(kwargs.items())})"
    )
"""


def test_a_failed_head_shows_its_stderr_and_never_attaches_to_a_stale_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text(_FAKE_RAY)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    with pytest.raises(RuntimeError) as failed:
        SharedRayCluster(num_cpus=2, num_gpus=0, start_timeout=120).start()
    message = str(failed.value)
    assert message.startswith("the shared Ray cluster's head exited with 1 before it was ready")
    # the head's own reason, no longer discarded
    assert "ConnectionError: fake ray: could not attach to the address in ray_current_cluster" in message
    # and the head always starts a new cluster: a stale /tmp/ray/ray_current_cluster cannot make it attach
    assert "('address', 'local')" in message
