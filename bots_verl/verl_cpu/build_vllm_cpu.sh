#!/usr/bin/env bash
# `make vllm-cpu`: vLLM 0.24.0 (the version verl 0.9.1 pins) built from its source distribution for vLLM's CPU backend
# (VLLM_TARGET_DEVICE=cpu), in its own venv with verl 0.9.1 and bots-verl. Its own venv because vLLM 0.24.0 builds
# against torch 2.11.0, and our CPU environment runs torch 2.13.0.
#
# Resumable: each stage leaves a stamp in the venv and is skipped on a rerun; the C++ build happens in the unpacked
# source tree (build/vllm-cpu/vllm-0.24.0/build), so an interrupted compile picks up where it stopped. Every stage's
# seconds are printed and appended to build/vllm-cpu/times.log.
#
# Settings (environment):
#   VLLM_VENV    the venv (default .venv-vllm)
#   VLLM_WORK    where the source is downloaded, unpacked and built (default build/vllm-cpu)
#   MAX_JOBS     compile jobs (default: the usable cores)
#   TORCH_INDEX  an index with torch's CPU builds (https://download.pytorch.org/whl/cpu) to build against torch 2.11.0+cpu;
#                default: PyPI's torch 2.11.0 (a CUDA build that runs on CPU; compiling against it needs CUDA's headers)
#   ALLOW_GCC_12_2=1
#                lower vLLM's x86 compiler gate from gcc 12.3 to 12.2 (Debian 12's gcc) in the unpacked source: an
#                experiment, not vLLM as released (vLLM recommends >= 12.3 "to avoid potential problems")
#   FETCHCONTENT_SOURCE_DIR_ONEDNN
#                a local oneDNN source tree; without it vLLM's CMake clones oneDNN v3.10 from GitHub (vLLM's own knob)
set -euo pipefail
cd "$(dirname "$0")/../.."
# the recipes' switch reader: ALLOW_GCC_12_2=true means on, and a value it cannot read is refused, not taken as off
source recipes/switches.sh
bool_switch ALLOW_GCC_12_2 0 || exit 2
MAX_JOBS=${MAX_JOBS:-$(nproc)}
int_knob MAX_JOBS 1 || exit 2
# vLLM's CPU kernels include libnuma's header (csrc/cpu/utils.cpp): said before the 5 GB of downloads, not an hour in
if ! echo '#include <numa.h>' | c++ -x c++ -E - >/dev/null 2>&1; then
    echo "vllm-cpu: vLLM's CPU backend needs a C++ compiler and libnuma's headers: apt-get install g++ libnuma-dev" >&2
    exit 2
fi

VLLM_VERSION=0.24.0
# The torch vLLM 0.24.0's build pins (pyproject's build-system). PyPI has only its CUDA build, which runs on CPU;
# vLLM's own requirements/cpu.txt asks for the +cpu build from download.pytorch.org (TORCH_INDEX).
VLLM_SDIST_URL=https://files.pythonhosted.org/packages/d4/17/ea541f9ffb31d438ed6a5a8e1f7b9805410664abf97e326f28416147a5da/vllm-0.24.0.tar.gz
VLLM_SDIST_SHA256=0862453adc1f3339f1a0c9dca1179c34d6ed6e118f87b6e5bddd120af614ac66
TORCH_VERSION=2.11.0
TORCHVISION_VERSION=0.26.0
if [ -n "${TORCH_INDEX:-}" ]; then
    TORCH_SPECS=("torch==$TORCH_VERSION+cpu" "torchvision==$TORCHVISION_VERSION+cpu" --extra-index-url "$TORCH_INDEX")
else
    TORCH_SPECS=("torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION")
fi
# transformers' own range for `kernels` (its "kernels" extra): pip otherwise resolved kernels 0.19.1, whose
# LayerRepository refuses transformers 5.10's hub-kernel table at import ("Either a revision or a version must be
# specified."), so `import vllm` failed before any model loaded (found 2026-12-04; 0.12.3 imports and generates)
KERNELS_SPEC="kernels>=0.12,<0.13"
VENV=${VLLM_VENV:-.venv-vllm}
case $VENV in /*) ;; *) VENV=$PWD/$VENV ;; esac
WORK=${VLLM_WORK:-build/vllm-cpu}
export MAX_JOBS
# read by vLLM's setup.py in every stage that touches the source (its metadata carries the target device)
export VLLM_TARGET_DEVICE=cpu
PY=$VENV/bin/python
# the venv's cmake (>= 3.26, vLLM's minimum) and ninja before the system's
export PATH=$VENV/bin:$PATH
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
SRC=$WORK/vllm-$VLLM_VERSION

stage() {  # stage NAME COMMAND...: run COMMAND once (a stamp in the venv marks it done), print and log its time
    local name=$1
    shift
    if [ -f "$VENV/.vllm-cpu-$name" ]; then
        echo "vllm-cpu: $name already done"
        return
    fi
    echo "vllm-cpu: $name ..."
    local start=$SECONDS
    "$@"
    local took=$((SECONDS - start))
    echo "vllm-cpu: $name done in ${took} s"
    echo "$(date -u +%FT%TZ) $name ${took}s MAX_JOBS=$MAX_JOBS" >>"$WORK/times.log"
    touch "$VENV/.vllm-cpu-$name"
}

make_venv() {
    python3 -m venv "$VENV"
    "$PY" -m pip install -q -U pip
}

build_deps() {
    # pyproject's build-system requires, installed here because the build runs without isolation (it must see the
    # torch it links against, and pip's isolated build would fetch its own)
    "$PY" -m pip install -q "${TORCH_SPECS[@]}" "cmake>=3.26.1" ninja "packaging>=24.2" "setuptools==77.0.3" \
        "setuptools-scm>=8.0" "setuptools-rust>=1.9.0" wheel jinja2
}

download() {
    # by URL and hash: `pip download vllm==0.24.0` refuses it, as its metadata says 0.24.0+cpu once built for the CPU
    curl -fsSL -o "$WORK/vllm-$VLLM_VERSION.tar.gz" "$VLLM_SDIST_URL"
    echo "$VLLM_SDIST_SHA256  $WORK/vllm-$VLLM_VERSION.tar.gz" | sha256sum -c --quiet
    tar xzf "$WORK/vllm-$VLLM_VERSION.tar.gz" -C "$WORK"
}

runtime_deps() {
    # requirements/common.txt and cpu.txt, with torch held at the build's version (its +cpu pin is not on PyPI)
    grep -v -E '^(torch|torchaudio|torchvision)([ =;<>]|$)|^-r |^--extra-index-url' "$SRC/requirements/cpu.txt" \
        >"$WORK/cpu-runtime.txt"
    "$PY" -m pip install -q -r "$SRC/requirements/common.txt" -r "$WORK/cpu-runtime.txt" \
        "$KERNELS_SPEC" "${TORCH_SPECS[@]}"
}

compile_vllm() {
    # PyPI's torch is its CUDA build, and its CMake config (find_package(Torch)) stops without CUDA's headers and
    # runtime, even for a CPU extension: point CMake at a CUDA toolkit (CUDA_HOME, else /usr/local/cuda). Nothing of it
    # is linked into the CPU backend. With TORCH_INDEX=https://download.pytorch.org/whl/cpu none is needed.
    local cuda_home=${CUDA_HOME:-/usr/local/cuda}
    if [ -z "${TORCH_INDEX:-}" ] && [ -d "$cuda_home/include" ]; then
        # and at the NVRTC the CUDA torch links, which its pip package (nvidia/cu*/lib) carries, not every toolkit
        local nvrtc
        nvrtc=$("$PY" -c "import glob, os, nvidia; print((sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], \
'*', 'lib', 'libnvrtc.so.*'))) + [''])[0])")
        export CMAKE_ARGS="${CMAKE_ARGS:-} -DCUDA_TOOLKIT_ROOT_DIR=$cuda_home${nvrtc:+ -DCUDA_nvrtc_LIBRARY=$nvrtc -DCUDA_NVRTC_LIB=$nvrtc}"
    fi
    if [ "$ALLOW_GCC_12_2" = 1 ]; then
        sed -i 's/CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12.3/CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12.2/' \
            "$SRC/cmake/cpu_extension.cmake"
        echo "vllm-cpu: ALLOW_GCC_12_2=1: vLLM's gcc >= 12.3 gate lowered to 12.2 in $SRC/cmake/cpu_extension.cmake"
    fi
    # in-tree build (pip builds a local directory in place), so the CMake build folder survives an interruption
    (cd "$SRC" && "$PY" -m pip install -v --no-build-isolation --no-deps .) \
        >"$WORK/compile.log" 2>&1 || {
        echo "vllm-cpu: the build failed; its last lines ($WORK/compile.log):" >&2
        tail -40 "$WORK/compile.log" >&2
        return 1
    }
}

install_verl() {
    # bots-verl with its `verl` extra (verl 0.9.1) beside the vLLM just built; torch stays at the build's version
    # (no vllm requirement here: pip once replaced the CPU build, 0.24.0+cpu, with PyPI's CUDA wheel of 0.24.0)
    "$PY" -m pip install -q -e ".[verl]" "$KERNELS_SPEC" "${TORCH_SPECS[@]}"
}

check() {
    # the installed vLLM must be this build, on vLLM's CPU platform, and its engine must import (a dependency it
    # pulls in can break `from vllm import LLM` while the platform module still imports)
    "$PY" -c "import importlib.metadata as m, verl, torch, bots_verl; from vllm.platforms import current_platform as p; from vllm import LLM; \
v = m.version('vllm'); print(f'vllm {v} ({p.device_type}), verl {verl.__version__}, torch {torch.__version__}'); \
assert v.endswith('+cpu') and p.device_type == 'cpu', 'the installed vllm is not the CPU build'"
}

total=$SECONDS
stage venv make_venv
stage build-deps build_deps
stage download download
stage runtime-deps runtime_deps
stage compile compile_vllm
stage verl install_verl
check
echo "vllm-cpu: ready in $VENV ($((SECONDS - total)) s this call; stage times in $WORK/times.log)"
