"""verl 0.9.1's code that our glue and CPU backend depend on has not changed (bots_verl.integration.safety.verl_pins).

Fails, naming the verl object and what of ours to re-check, when the installed verl differs from the pinned 0.9.1.
"""

from __future__ import annotations

from pathlib import Path

import verl

from bots_verl.integration.safety import verl_pins


def test_installed_verl_is_the_pinned_version():
    assert verl.__version__ == verl_pins.VERL_VERSION, (
        f"verl {verl.__version__} is installed; bots-verl pins {verl_pins.VERL_VERSION}. Re-check every entry of "
        "bots_verl/integration/safety/verl_pins.py against the new version before changing the pin"
    )


def test_pinned_verl_sources_are_unchanged():
    changed = verl_pins.changed_pins()
    assert not changed, "verl code that bots-verl depends on changed:\n" + "\n".join(changed)


def test_a_changed_source_is_reported_with_what_to_recheck(monkeypatch):
    target = "verl.trainer.ppo.v1.replay_buffer:ReplayBuffer._clear_groups"
    pinned, depends = verl_pins.PINS[target]
    monkeypatch.setitem(verl_pins.PINS, target, ("0" * 64, depends))
    changed = verl_pins.changed_pins()
    assert changed == [f"{target} changed since verl 0.9.1; re-check: {depends}"]


def test_installed_dependencies_are_in_their_tested_ranges_and_setup_py_bounds_them_the_same():
    assert verl_pins.dependency_problems() == []
    setup_py = (Path(__file__).parents[2] / "setup.py").read_text()
    for distribution, spec in verl_pins.DEPENDENCY_VERSIONS.items():
        assert f'"{distribution}{spec}"' in setup_py, f"setup.py does not bound {distribution} to {spec}"
    assert f'"verl[verl-core]=={verl_pins.VERL_VERSION}"' in setup_py
