"""bots-verl: Bayesian Online Task Selection (BOTS) for verl."""

from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent

EXTRAS = {
    # verl 0.9.1 with what its V1 (TransferQueue) trainer imports; the `verl-core` extra carries ray[default],
    # TransferQueue, cachetools, fastapi, uvicorn, torchdata, tensordict and hydra-core, named here as well.
    # The glue reads internals of verl, TransferQueue, torchdata and tensordict, so each is bounded to the versions
    # tested; bots_verl/integration/safety/verl_pins.py (DEPENDENCY_VERSIONS) checks the same ranges at run start.
    "verl": [
        "verl[verl-core]==0.9.1",
        "ray[default]>=2.41.0",
        "TransferQueue>=0.1.10,<0.2",
        "cachetools",
        "fastapi",
        "uvicorn",
        "torchdata>=0.11.0,<0.12",
        "tensordict>=0.10.0,<0.11",
        "hydra-core",
        # post-import hooks of the CPU backend (bots_verl.verl_cpu.verl_registrations)
        "wrapt",
        # the math reward (recipes' default) checks answers symbolically
        "math-verify",
    ],
    # Rollouts on GPUs: the vLLM version verl 0.9.1 pins in its own `vllm` extra (it brings a CUDA torch).
    "gpu": ["verl[vllm]==0.9.1", "vllm==0.24.0"],
    # Symbolic answer checking for the math reward.
    "math": ["math-verify"],
    # The simulator's plots and progress bar.
    "sim": ["matplotlib", "tqdm"],
    # analysis/: tables, figures and the jupytext notebooks.
    "analysis": ["matplotlib", "jupytext", "nbclient", "nbformat", "ipykernel", "tensorboard"],
    # reference_eval/: the transformers backend (small models on CPU), progress bar and plots.
    "reference": ["transformers", "tokenizers", "tqdm", "matplotlib"],
    "test": ["pytest", "pytest-timeout", "pytest-xdist", "hypothesis", "ruff", "mypy", "transformers", "tokenizers"],
}
EXTRAS["all"] = sorted({req for name, reqs in EXTRAS.items() if name != "gpu" for req in reqs})

setup(
    name="bots-verl",
    version="0.1.0",
    description="Bayesian Online Task Selection (BOTS, arXiv 2510.26374) for LLM reinforcement finetuning with verl",
    long_description=(ROOT / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(
        include=[
            "bots_verl",
            "bots_verl.*",
            "reference_eval",
            "reference_eval.*",
            "analysis",
            "analysis.*",
        ]
    ),
    include_package_data=True,
    package_data={"bots_verl": ["config/*.yaml"]},
    # filelock: bots_verl.fileio.OutputLock (its `on_acquired` hook signs the lock file with the holder)
    install_requires=["numpy>=1.24", "pandas", "pyarrow>=19.0.0", "omegaconf", "filelock>=4.3"],
    extras_require=EXTRAS,
    # vLLM loads these in each of its processes; ours acts only on vLLM's CPU platform inside a CPU-backend run
    # (verl's weight sync into vLLM's CPU linear layers: bots_verl/verl_cpu/vllm_weight_sync.py)
    entry_points={"vllm.general_plugins": ["bots_verl_cpu_weight_sync = bots_verl.verl_cpu.vllm_weight_sync:register"]},
)
