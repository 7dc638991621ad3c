# shellcheck shell=bash
# How every recipe reads its environment switches and integer knobs (issue 47): sourced by recipes/common.sh (so by
# every run_*.sh and ablation) and by the scripts that do not source it (recipes/toy/*.sh, cpu_recipes.sh,
# cpu_pipeline.sh), so that one function decides what `DRY_RUN=true` means everywhere. A value outside the accepted
# set is refused, naming the variable, before anything is created or launched: a switch read as 0 because it was
# spelled `true` once started a full GPU run instead of a dry run.

# bool_switch NAME DEFAULT: normalise the switch NAME to 1 or 0.
#   on:  1, true, yes, on     off: 0, false, no, off     (any case; unset or empty: DEFAULT)
# Anything else prints an error naming NAME and the accepted values and returns 2 (callers exit).
bool_switch() {
    local name=$1 default=$2
    local raw=${!name:-$default}
    case "${raw,,}" in
        1 | true | yes | on) printf -v "$name" 1 ;;
        0 | false | no | off) printf -v "$name" 0 ;;
        *)
            echo "recipes: $name='$raw' is not a switch value: use 1/true/yes/on or 0/false/no/off (any case)" >&2
            return 2 ;;
    esac
}

# int_knob NAME MIN [ALSO...]: NAME must be a decimal integer >= MIN (no sign, no leading zeros, no spaces), or one
# of the literal values ALSO (e.g. '' for "unset", -1 for verl's "never"). Otherwise an error naming NAME; returns 2.
int_knob() {
    local name=$1 min=$2
    shift 2
    local raw=${!name-} also
    for also in "$@"; do
        [[ $raw == "$also" ]] && return 0
    done
    # the length guard keeps bash's 64-bit arithmetic from wrapping a huge value into a small one
    if [[ $raw =~ ^(0|[1-9][0-9]{0,17})$ ]] && ((raw >= min)); then
        return 0
    fi
    local extra=""
    if (($# > 0)); then
        extra=" (or one of:$(printf " '%s'" "$@"))"
    fi
    echo "recipes: $name='$raw' must be an integer >= $min$extra" >&2
    return 2
}
