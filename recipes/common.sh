# shellcheck shell=bash
# Shared settings of every BOTS recipe: sourced by recipes/run_*.sh and recipes/ablations/*.sh, never run directly.
#
# A recipe sets DOMAIN (math|code|logic), MODEL_PATH and METHOD (a method label, see "methods" below) and optionally
# EXTRA_ARGS (hydra overrides), then calls `bots_launch "$@"`. Every value below is a ${VAR:-default} knob, except the
# baselines' defining settings, which are fixed so that a label always means one config; anything else is a hydra
# override passed after the script name (it comes last, so it wins).
#
# Sources of the settings (recipes/README.md has the full table):
#   [paper]   BOTS, arXiv 2510.26374 §4 (GRPO, 16 rollouts per task, lambda = rho = 0.1, p* = 0.5, the two GURU
#             reference columns, Qwen2.5-1.5B/7B), as far as the abstract, the reviews and the notes quote it
#   [notes]   the paper's baseline descriptions as transcribed by two secondary "paper notes" (unverified against the
#             PDF): BOTS-MoPPS "lambda = 0, rho = 0"; BOTS-DOTS "approximating lambda = 1, rho = 1", "without Thompson
#             sampling"; and its main-table and rho-ablation numbers
#   [trinity] the authors' Trinity-RFT port, examples/bots/bots.yaml (32 tasks/step, lr 1e-6, prompt 4096 / response
#             8192 tokens, temperature 1.0, 24576 tokens per GPU, grad clip 1.0, 1 epoch, eval every 40 steps)
#   [mopps]   MoPPS' own code (thu-rllab/MoPPS): Beta posteriors, Thompson sampling, decay 1.0 in its math scripts
#   [dots]    DOTS' own code (ASTRAL-Group/data-efficient-llm-rl): point estimates, softmax(-|p - 0.5| / tau), tau 1e-3
#   [guru]    GURU's RL script (no KL, clip 0.2, top_p 1.0)
#   [infer]   our choice or reading where no source says


# The knobs the CPU mode (CPU=1) sets when the user has not: read here, before the defaults below fill them in, so that
# a value the user typed wins in CPU mode too (or is refused there with the reason) instead of being replaced
TYPED_KNOBS=" "
for _knob in NNODES GPUS_PER_NODE ROLLOUT_TP TRAIN_BATCH_SIZE ROLLOUT_N PPO_MINI_BATCH_SIZE MAX_PROMPT_LENGTH \
    MAX_RESPONSE_LENGTH MAX_TOKENS_PER_GPU; do
    if [[ -n ${!_knob:-} ]]; then TYPED_KNOBS+="$_knob "; fi
done
unset _knob

# ---- cluster and paths
# prepared data: python -m bots_verl.data.guru --guru-dir ... --out-dir "$DATA_DIR"
DATA_DIR=${DATA_DIR:-$HOME/data/bots_guru}
RUN_ROOT=${RUN_ROOT:-$PWD/runs}
NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
PYTHON=${PYTHON:-python3}
PROJECT_NAME=${PROJECT_NAME:-bots-verl}
# console + verl's file backend (metrics.jsonl in the run dir); add wandb/tensorboard with LOGGERS='["console","file","wandb"]'
LOGGERS=${LOGGERS:-'["console","file"]'}
# Switches take 1/true/yes/on or 0/false/no/off (any case; unset: off) and anything else stops the script, naming the
# variable (recipes/switches.sh); the integer knobs below are checked the same way before anything starts.
# shellcheck source=recipes/switches.sh
source "$(dirname "${BASH_SOURCE[0]}")/switches.sh"
# DRY_RUN=1: compose and validate the config (bots.dry_run=true), create nothing, start nothing
bool_switch DRY_RUN 0 || exit 2
# CPU=1: train this recipe on CPU cores (bots_verl.verl_cpu) with a tiny local model; see "CPU mode" below
bool_switch CPU 0 || exit 2

# ---- the paper's setting
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-32}          # [trinity] tasks per step
ROLLOUT_N=${ROLLOUT_N:-16}                        # [paper] rollouts per task (= pseudo-count scale m)
LR=${LR:-1e-6}                                    # [trinity]
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-4096}      # [trinity]
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-8192}  # [trinity] "8k responses"
TEMPERATURE=${TEMPERATURE:-1.0}                   # [trinity] rollout and eval
TOP_P=${TOP_P:-1.0}                               # [guru]
PPO_MINI_BATCH_SIZE=${PPO_MINI_BATCH_SIZE:-32}    # [infer] one on-policy update per step (in tasks; x n in verl)
MAX_TOKENS_PER_GPU=${MAX_TOKENS_PER_GPU:-24576}   # [trinity] dynamic batch size
TOTAL_EPOCHS=${TOTAL_EPOCHS:-1}                   # [trinity]
TOTAL_STEPS=${TOTAL_STEPS:-}                      # empty: one pass of the pool per epoch (pool / 32 steps)
TEST_FREQ=${TEST_FREQ:-40}                        # [trinity] eval_interval
SAVE_FREQ=${SAVE_FREQ:-200}                       # [infer]
ROLLOUT_TP=${ROLLOUT_TP:-1}                       # [trinity] TP=1 engines (use 2 for 7B if memory is short)
GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.6}
# The 7B recipes on too few GPUs are refused before Ray (their actor cannot fit; the per-GPU figures, measured on one
# H200 with FSDP computed, are in recipes/results/gpu_h200.md): GPU_MEMORY_GIB is one card's memory in whole GiB
# (empty: nvidia-smi's where this machine has a GPU, else 80), GPU_MEMORY_CHECK=0 starts such a layout anyway.
GPU_MEMORY_GIB=${GPU_MEMORY_GIB:-}
GPU_MEMORY_CHECK=${GPU_MEMORY_CHECK:-1}
SEED=${SEED:-42}                                  # [trinity]
TARGET=${TARGET:-0.5}                             # [paper] p* (every BOTS-family method)
REFERENCE_COLUMNS=${REFERENCE_COLUMNS:-'[qwen2.5_7b_pass_rate,qwen3_30b_pass_rate]'}  # [paper] weak -> strong
# BOTS' own lambda, rho and selection rule; the sweep scripts set them (METHOD=bots_rho<x>, bots_lambda<x>, bots_greedy)
LAMBDA=${LAMBDA:-0.1}                             # [paper] forgetting toward the prior (old counts x (1 - lambda))
RHO=${RHO:-0.1}                                   # [paper] implicit-evidence weight
SELECTION=${SELECTION:-thompson}                  # [paper] Thompson sampling; greedy = posterior mean
CLIP_RATIO_HIGH=${CLIP_RATIO_HIGH:-0.2}           # PPO's upper clip; DAPO's clip-higher is 0.28 (bots_ds ablation)
# issue 36 (ours): the train file and the pool's embedding file (python -m reference_eval embed) of the reference-light
# methods (bots_ref<pct>, bots_noref); the other methods train on $DATA_DIR/$DOMAIN/train.parquet without embeddings
TRAIN_FILE=${TRAIN_FILE:-}
TASK_EMBEDDINGS=${TASK_EMBEDDINGS:-}

# ---- CPU mode (CPU=1): the same method, data files, reward settings, reference columns and algorithm settings; only
# what a CPU cannot carry changes: the model (a randomly initialised tiny Llama with a byte-level tokenizer that reads
# any prompt, built locally by bots_verl.verl_cpu.tiny_model, nothing downloaded), trainer.device=cpu with our backend,
# the rollout engine (the hf server instead of vLLM; CPU_ROLLOUT=vllm keeps vLLM, which needs vLLM's CPU build from
# `make vllm-cpu` and PYTHON=.venv-vllm/bin/python), one machine, TP 1, and the defaults of the sizes below [infer:
# small enough for a 2-core machine]. A size the user set wins: CPU_TRAIN_BATCH_SIZE=8 (the CPU mode's own value, for an
# environment that also sets the GPU one), else TRAIN_BATCH_SIZE=8; a value the CPU mode cannot run (NNODES > 1,
# ROLLOUT_TP > 1, a prompt + response longer than the tiny model's positions) is refused, with the reason.
CPU_MODEL_DIR=${CPU_MODEL_DIR:-}                  # empty: $RUN_ROOT/cpu_tiny_model (_h128 for the vllm engine)
CPU_KNOBS=(CPU_TRAIN_BATCH_SIZE CPU_ROLLOUT_N CPU_PPO_MINI_BATCH_SIZE CPU_MAX_PROMPT_LENGTH CPU_MAX_RESPONSE_LENGTH
    CPU_MAX_TOKENS_PER_GPU CPU_GRAPH_K)
# knob=default in CPU mode (prompt tokens are bytes: the GURU-fixture prompts fit in 1024)
CPU_DEFAULTS=(TRAIN_BATCH_SIZE=4 ROLLOUT_N=4 PPO_MINI_BATCH_SIZE=4 MAX_PROMPT_LENGTH=1024 MAX_RESPONSE_LENGTH=192
    MAX_TOKENS_PER_GPU=8192)
CPU_MAX_POSITIONS=4096                            # the tiny model's max_position_embeddings (tiny_model.MAX_POSITIONS)
bots_cpu_mode() {
    [[ $CPU == 1 ]] || return 0
    CPU_ROLLOUT=${CPU_ROLLOUT:-hf}
    if [[ $CPU_ROLLOUT != hf && $CPU_ROLLOUT != vllm ]]; then
        echo "CPU_ROLLOUT='$CPU_ROLLOUT': the CPU mode generates with hf or vllm" >&2
        return 1
    fi
    local pair name cpu_name
    for pair in "${CPU_DEFAULTS[@]}"; do
        name=${pair%%=*}
        cpu_name=CPU_$name
        if [[ -n ${!cpu_name:-} ]]; then
            printf -v "$name" %s "${!cpu_name}"
        elif [[ $TYPED_KNOBS != *" $name "* ]]; then
            printf -v "$name" %s "${pair#*=}"
        fi
    done
    TOTAL_STEPS=${TOTAL_STEPS:-2}
    # one machine with logical GPUs (the CPU backend refuses trainer.nnodes > 1); the hf server has no tensor parallelism
    [[ $TYPED_KNOBS == *" GPUS_PER_NODE "* ]] || GPUS_PER_NODE=1
    if [[ $NNODES != 1 && $TYPED_KNOBS == *" NNODES "* ]]; then
        echo "recipes: NNODES='$NNODES' cannot run in CPU mode: the CPU backend trains on one machine (unset it or set 1)" >&2
        return 1
    fi
    if [[ $ROLLOUT_TP != 1 && $TYPED_KNOBS == *" ROLLOUT_TP "* ]]; then
        echo "recipes: ROLLOUT_TP='$ROLLOUT_TP' cannot run in CPU mode: the CPU backend runs the rollout without tensor" \
            "parallelism (unset it or set 1)" >&2
        return 1
    fi
    NNODES=1
    ROLLOUT_TP=1
    if ((MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH > CPU_MAX_POSITIONS)); then
        echo "recipes: MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH = $MAX_PROMPT_LENGTH + $MAX_RESPONSE_LENGTH is longer" \
            "than the CPU mode's tiny model takes ($CPU_MAX_POSITIONS positions)" >&2
        return 1
    fi
    # vLLM's CPU attention takes heads of 32 or more: the vllm engine gets a model twice as wide (head size 32, not 16)
    local hidden=64 model_dir=$RUN_ROOT/cpu_tiny_model
    if [[ $CPU_ROLLOUT == vllm ]]; then
        hidden=128
        model_dir=$RUN_ROOT/cpu_tiny_model_h128
    fi
    CPU_MODEL_DIR=${CPU_MODEL_DIR:-$model_dir}
    if [[ $DRY_RUN != 1 && -z ${RECIPE_ARGV_DIR:-} ]]; then
        "$PYTHON" -m bots_verl.verl_cpu.tiny_model "$CPU_MODEL_DIR" --hidden-size "$hidden" >/dev/null || return 1
    fi
    CPU_ARGS=(
        trainer.device=cpu
        "actor_rollout_ref.rollout.name=$CPU_ROLLOUT"
        # flash-attn's varlen kernels and activation recomputation: CUDA only / no use at this size
        actor_rollout_ref.model.use_remove_padding=False
        actor_rollout_ref.model.enable_gradient_checkpointing=False
    )
    # the methods with a task graph (bots_ref<pct>, bots_noref): its 16 neighbours per task need a pool of 17 or
    # more, and the math pool of the GURU-shaped fixture the CPU checks train on has 12
    if [[ " ${METHOD_ARGS[*]} " == *" bots.task_embeddings="* ]]; then
        CPU_ARGS+=("+bots.hparams.graph_k=${CPU_GRAPH_K:-4}")
        # the run is that method with another graph_k, and its label says so (a selector's name means its defaults)
        # (quoted: hydra reads an unquoted '=' in a value as a second assignment)
        label="'$label+graph_k=${CPU_GRAPH_K:-4}'"
    fi
}

# ---- methods: METHOD -> selector and hyperparameters, into the array METHOD_ARGS (bots_verl/runlog.py METHODS
# defines each label; the dry run refuses a config that disagrees with its label, so the two cannot drift apart)
bots_method_args() {
    case "$1" in
        random)
            # [paper] uniform sampling, unique within a batch: the reference of every TTB/BSF ratio
            METHOD_ARGS=(bots.selector=random) ;;
        offline_easy2hard)
            # [paper][trinity] static curriculum by the reference pass rates, easiest first (weak column, then strong)
            METHOD_ARGS=(bots.selector=offline_easy2hard) ;;
        bots | bots_rho* | bots_lambda* | bots_greedy)
            # [paper] BOTS: lambda = rho = 0.1, p* = 0.5, interpolation evidence, Thompson sampling
            METHOD_ARGS=(bots.selector=bots "+bots.hparams.lam=$LAMBDA" "+bots.hparams.rho=$RHO"
                "+bots.hparams.target=$TARGET" "+bots.hparams.selection=$SELECTION" +bots.hparams.evidence=interpolation) ;;
        bots_mopps)
            # BOTS-MoPPS, explicit evidence only, inside the BOTS framework (not MoPPS' own code):
            #   lam=0    [notes] "lambda = 0"; agrees with [mopps]' math default decay 1.0 (decay = 1 - lambda, i.e. no
            #            forgetting). Unsure: MoPPS' other scripts decay 0.5, and the reviews say the paper words
            #            lambda inconsistently; lambda = 0 is read in Eq. 1's convention (larger = more forgetting).
            #   rho=0, evidence=none   [notes] "rho = 0": no implicit evidence, so no interpolation plug-in either
            #   thompson [mopps] Thompson sampling toward p* = 0.5 [paper]. Unsure: MoPPS samples from a candidate pool
            #            (ts_ratio x batch); here, as in BOTS, the whole pool [infer].
            METHOD_ARGS=(bots.selector=bots +bots.hparams.lam=0.0 +bots.hparams.rho=0.0 "+bots.hparams.target=$TARGET"
                +bots.hparams.selection=thompson +bots.hparams.evidence=none) ;;
        bots_dots)
            # BOTS-DOTS, implicit evidence only, with the interpolation plug-in in place of DOTS' attention model
            # (paper App. B.6 per the reviews; no reference-set rollouts, no rollout replay):
            #   lam=1    [notes] "approximating lambda = 1": no memory, each step's estimate replaces the posterior
            #            (as the [notes] summary of the intro puts it, "implicit-only methods ... discard history")
            #   rho=1    [notes] "rho = 1": unselected tasks follow the interpolation estimate alone
            #   greedy   [notes] "without Thompson sampling": the posterior mean closest to p*. Unsure: DOTS itself
            #            samples softmax(-|p - 0.5| / tau) with tau = 1e-3 [dots], which is greedy up to near-ties.
            METHOD_ARGS=(bots.selector=bots +bots.hparams.lam=1.0 +bots.hparams.rho=1.0 "+bots.hparams.target=$TARGET"
                +bots.hparams.selection=greedy +bots.hparams.evidence=interpolation) ;;
        bots_ds)
            # issue 48: paper BOTS plus verl's DAPO dynamic sampling on acc (arXiv 2503.14476): all-0 / all-1 groups are
            # discarded and the step refilled, each refill selected from the posterior as updated by the discarded
            # groups (they are evidence too). max_num_gen_batches=10, as verl's DAPO recipe: a step that would dispatch
            # more than 10 x train_batch_size prompts stops the run, before its update and checkpoint (verl 0.9.1's V1
            # buffer ignores the key; BOTS enforces it: bots_verl/integration/safety/refill_cap.py)
            METHOD_ARGS=(bots.selector=bots "+bots.hparams.lam=$LAMBDA" "+bots.hparams.rho=$RHO"
                "+bots.hparams.target=$TARGET" "+bots.hparams.selection=$SELECTION" +bots.hparams.evidence=interpolation
                algorithm.filter_groups.enable=true algorithm.filter_groups.metric=acc
                algorithm.filter_groups.max_num_gen_batches=10) ;;
        bots_ref*)
            # ours (issue 36): paper BOTS with reference columns on a labelled subset (NaN elsewhere), the NaN rows
            # imputed from their labelled neighbours in the task graph of $TASK_EMBEDDINGS (core preset bots_partial_ref)
            METHOD_ARGS=(bots.selector=bots_partial_ref "bots.task_embeddings=$TASK_EMBEDDINGS") ;;
        bots_noref)
            # ours (issue 36): no reference columns; each step's explicit evidence spreads to similar tasks of the task
            # graph of $TASK_EMBEDDINGS (core preset bots_noref)
            METHOD_ARGS=(bots.selector=bots_noref "bots.task_embeddings=$TASK_EMBEDDINGS") ;;
        *)
            echo "unknown METHOD '$1' (random|offline_easy2hard|bots_mopps|bots_dots|bots|bots_rho<x>|bots_lambda<x>|bots_greedy|bots_ds|bots_ref<pct>|bots_noref)" >&2
            return 1 ;;
    esac
}

# Evaluation sets per domain (written by bots_verl.data.guru; the choice is explained in recipes/README.md).
bots_val_files() {
    case "$1" in
        math) echo "['$DATA_DIR/math/val_math500.parquet','$DATA_DIR/math/val_aime24.parquet']" ;;
        code) echo "['$DATA_DIR/code/val_livecodebench.parquet','$DATA_DIR/code/val_humaneval.parquet']" ;;
        logic) echo "['$DATA_DIR/logic/val_zebra.parquet','$DATA_DIR/logic/val_ordering.parquet','$DATA_DIR/logic/val_arcagi1.parquet']" ;;
        *) echo "unknown DOMAIN '$1' (math|code|logic)" >&2; return 1 ;;
    esac
}

# Short model tag for run names: Qwen/Qwen2.5-1.5B-Instruct -> qwen2.5-1.5b-instruct
bots_model_tag() {
    local base=${1%/}
    base=${base##*/}
    echo "${base,,}"
}

# The switches and integer knobs, checked before anything is created or started (a bad value would otherwise reach
# verl as a string, or turn a dry run into a real one). Checked again here, not only when common.sh is sourced: a
# script may set a knob afterwards (`CPU=yes bots_launch`).
bots_check_settings() {
    bool_switch DRY_RUN 0 && bool_switch CPU 0 && bool_switch GPU_MEMORY_CHECK 1 || return
    local name
    for name in NNODES GPUS_PER_NODE TRAIN_BATCH_SIZE ROLLOUT_N PPO_MINI_BATCH_SIZE MAX_PROMPT_LENGTH \
        MAX_RESPONSE_LENGTH MAX_TOKENS_PER_GPU TOTAL_EPOCHS ROLLOUT_TP; do
        int_knob "$name" 1 || return
    done
    int_knob TOTAL_STEPS 1 '' || return  # empty: verl's epochs decide
    int_knob TEST_FREQ 1 -1 || return    # -1: verl's "never"
    int_knob SAVE_FREQ 1 -1 || return
    int_knob SEED 0 || return
    int_knob GPU_MEMORY_GIB 1 '' || return  # empty: nvidia-smi's, else 80
    if [[ $CPU == 1 ]]; then
        for name in "${CPU_KNOBS[@]}"; do
            int_knob "$name" 1 '' || return  # empty: the CPU default
        done
    fi
}

# bots_launch [hydra overrides...]: build the full command and run it (or dry-run it, or record it).
bots_launch() {
    : "${DOMAIN:?set DOMAIN}" "${MODEL_PATH:?set MODEL_PATH}" "${METHOD:?set METHOD}"
    bots_check_settings || return
    local method=$METHOD
    local label=$METHOD  # bots.run_log.method: what meta.json calls the run (the CPU mode may qualify it)
    local val_files
    val_files=$(bots_val_files "$DOMAIN") || return 1
    bots_method_args "$method" || return 1
    # the run keeps the script's model in its name; CPU mode marks it (the 1.5B and 7B scripts get separate runs)
    local tag
    tag=$(bots_model_tag "$MODEL_PATH")
    local CPU_ARGS=() model_path=$MODEL_PATH
    if [[ $CPU == 1 ]]; then
        tag=$tag-cpu
        bots_cpu_mode || return 1
        model_path=$CPU_MODEL_DIR
    fi
    local experiment=${EXPERIMENT_NAME:-${DOMAIN}_${tag}_${method}_s${SEED}}
    local run_dir=${RUN_DIR:-$RUN_ROOT/$experiment}

    local args=(
        # data: selection happens in the BOTS sampler, so verl's own shuffling is irrelevant
        "data.train_files=${TRAIN_FILE:-$DATA_DIR/$DOMAIN/train.parquet}"
        "data.val_files=$val_files"
        data.prompt_key=prompt
        "data.train_batch_size=$TRAIN_BATCH_SIZE"
        "data.max_prompt_length=$MAX_PROMPT_LENGTH"
        "data.max_response_length=$MAX_RESPONSE_LENGTH"
        data.filter_overlong_prompts=True
        data.truncation=error
        "data.seed=$SEED"
        # algorithm [paper: GRPO; guru: no KL]
        algorithm.adv_estimator=grpo
        algorithm.use_kl_in_reward=False
        # actor
        "actor_rollout_ref.model.path=$model_path"
        actor_rollout_ref.model.use_remove_padding=True
        actor_rollout_ref.model.enable_gradient_checkpointing=True
        "actor_rollout_ref.actor.optim.lr=$LR"
        "actor_rollout_ref.actor.ppo_mini_batch_size=$PPO_MINI_BATCH_SIZE"
        actor_rollout_ref.actor.use_dynamic_bsz=True
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$MAX_TOKENS_PER_GPU"
        actor_rollout_ref.actor.use_kl_loss=False
        actor_rollout_ref.actor.entropy_coeff=0
        actor_rollout_ref.actor.clip_ratio_low=0.2
        "actor_rollout_ref.actor.clip_ratio_high=$CLIP_RATIO_HIGH"
        actor_rollout_ref.actor.grad_clip=1.0
        # rollout
        actor_rollout_ref.rollout.name=vllm
        "actor_rollout_ref.rollout.n=$ROLLOUT_N"
        "actor_rollout_ref.rollout.temperature=$TEMPERATURE"
        "actor_rollout_ref.rollout.top_p=$TOP_P"
        "actor_rollout_ref.rollout.tensor_model_parallel_size=$ROLLOUT_TP"
        "actor_rollout_ref.rollout.gpu_memory_utilization=$GPU_MEMORY_UTILIZATION"
        actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=$MAX_TOKENS_PER_GPU"
        "actor_rollout_ref.rollout.val_kwargs.temperature=$TEMPERATURE"
        "actor_rollout_ref.rollout.val_kwargs.top_p=$TOP_P"
        actor_rollout_ref.rollout.val_kwargs.do_sample=True
        actor_rollout_ref.rollout.val_kwargs.n=1
        # reward: one dispatcher for math, code and logic
        reward.custom_reward_function.path=pkg://bots_verl.rewards
        reward.custom_reward_function.name=compute_score
        # trainer
        "trainer.logger=$LOGGERS"
        "trainer.project_name=$PROJECT_NAME"
        "trainer.experiment_name=$experiment"
        "trainer.nnodes=$NNODES"
        "trainer.n_gpus_per_node=$GPUS_PER_NODE"
        "trainer.total_epochs=$TOTAL_EPOCHS"
        "trainer.test_freq=$TEST_FREQ"
        "trainer.save_freq=$SAVE_FREQ"
        trainer.val_before_train=True
        "trainer.default_local_dir=$run_dir/checkpoints"
        # BOTS: the method's selector and hyperparameters (bots_method_args), then the shared settings
        "${METHOD_ARGS[@]}"
        "bots.reference_columns=$REFERENCE_COLUMNS"
        bots.task_id_field=task_id
        bots.success.rule=acc
        "bots.seed=$SEED"
        "bots.run_log.dir=$run_dir"
        "bots.run_log.domain=$DOMAIN"
        "bots.run_log.method=$label"
        "bots.gpu_memory.check=$([[ $GPU_MEMORY_CHECK == 1 ]] && echo true || echo false)"
    )
    if [[ -n $GPU_MEMORY_GIB ]]; then
        args+=("bots.gpu_memory.card_gib=$GPU_MEMORY_GIB")
    fi
    if [[ -n $TOTAL_STEPS ]]; then
        args+=("trainer.total_training_steps=$TOTAL_STEPS")
    fi
    args+=(${CPU_ARGS[@]+"${CPU_ARGS[@]}"} ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"} "$@")
    if [[ $DRY_RUN == 1 ]]; then
        # validate only; hydra writes nothing either (its default is ./outputs/<date>/<time>/)
        args+=(bots.dry_run=true hydra.run.dir=. hydra.output_subdir=null hydra/job_logging=stdout)
    else
        # hydra's own log and the composed config (.hydra/config.yaml) go into the run directory
        args+=("hydra.run.dir=$run_dir/hydra")
    fi

    # Tests record the argv instead of running it (one python process then composes every recipe).
    if [[ -n ${RECIPE_ARGV_DIR:-} ]]; then
        mkdir -p "$RECIPE_ARGV_DIR"
        printf '%s\0' "${args[@]}" >"$RECIPE_ARGV_DIR/$experiment.argv"
        return 0
    fi
    if [[ $DRY_RUN != 1 ]]; then
        mkdir -p "$run_dir"
    fi
    echo "[bots] $experiment -> $run_dir (nnodes=$NNODES x $GPUS_PER_NODE GPUs, cpu=$CPU, dry_run=$DRY_RUN)" >&2
    "$PYTHON" -m bots_verl.main "${args[@]}"
}
