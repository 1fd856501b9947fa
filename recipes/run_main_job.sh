#!/usr/bin/env bash
# The main job: from a fresh machine to a trained and evaluated attention-link translation model.
#
#   bash recipes/run_main_job.sh                        # the full quickstart (under 20 minutes on 2 CPU cores)
#   bash recipes/run_main_job.sh --max_train_minutes 1  # extra flags override recipes/quickstart.yaml
#
# 1. installs what is missing: the SWORD Bible modules (Debian packages sword-text-sparv,
#    sword-text-web, sword-text-kjv), PyTorch and this package (into the active virtualenv, or
#    ./.venv, created if needed);
# 2. builds the offline Bible es-en corpus in data/bible-es-en;
# 3. trains recipes/quickstart.yaml into outputs/quickstart with PROCESSES data-parallel CPU
#    processes of one thread each (default 2; running again resumes an interrupted run within the
#    same time budget and evaluates a finished one again; delete the folder to start over) and
#    prints test BLEU/chrF and sample translations.
set -euo pipefail
cd "$(dirname "$0")/.."

CORPUS_DIR=${CORPUS_DIR:-data/bible-es-en}
OUTPUT_DIR=${OUTPUT_DIR:-outputs/quickstart}
SWORD_PACKAGES=(sword-text-sparv sword-text-web sword-text-kjv)
# Two processes of one intra-op thread each: on the 2-core machine of recipes/benchmarks/RESULTS.md
# ("Threads") that trained faster than one process with two threads, and one process with one.
PROCESSES=${PROCESSES:-2}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export TOKENIZERS_PARALLELISM=false

step() { printf '\n==> %s\n' "$*"; }
start=$(date +%s)

step "SWORD Bible modules"
missing=()
for package in "${SWORD_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    if ! command -v apt-get >/dev/null; then
        echo "Missing ${missing[*]} and no apt-get: install the SWORD modules spaRV1909eb, engWEB2015eb and" \
            "engKJV2006eb by other means and set SWORD_PATH to their library." >&2
        exit 1
    fi
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    echo "installing ${missing[*]}"
    "${sudo[@]}" apt-get -qq update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends "${missing[@]}" \
        >/dev/null
else
    echo "installed: ${SWORD_PACKAGES[*]}"
fi

step "Python environment"
own_venv=0
if [ -z "${VIRTUAL_ENV:-}" ]; then
    [ -d .venv ] || python3 -m venv .venv
    # shellcheck disable=SC1091
    . .venv/bin/activate
    own_venv=1
fi
echo "using $(command -v python)"
# (pip's warnings about package-index locations this machine lacks say nothing about the job: left out)
quiet_pip() { python -m pip install --quiet "$@" 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; }; }
if [ "$own_venv" -eq 1 ]; then
    # the job's own .venv: the tested set (constraints.txt)
    quiet_pip torch==2.13.0
    quiet_pip -c constraints.txt -e .
else
    # the user's own virtualenv: what is there and within the package's declared ranges stays as it is (a newer
    # Transformers or accelerate included); only what is missing or outside them is installed
    if python -c "import torch" 2>/dev/null; then
        echo "torch $(python -c 'import torch; print(torch.__version__)') is installed: kept"
    else
        echo "installing torch 2.13.0 (a CPU build on a CPU machine)"
        quiet_pip torch==2.13.0
    fi
    echo "installing hf_graphtf and what it needs that this virtualenv lacks (nothing it has is changed" \
        "where it is within pyproject.toml's ranges)"
    quiet_pip -e .
fi

step "Corpus: $CORPUS_DIR"
hf-graphtf build-corpus --output-dir "$CORPUS_DIR" >/dev/null
wc -l "$CORPUS_DIR"/*.jsonl

step "Training recipes/quickstart.yaml into $OUTPUT_DIR"
if [ "$PROCESSES" -gt 1 ]; then
    # --multi_gpu selects accelerate's multi-process launcher; the recipe's use_cpu makes it a gloo group
    launch=(accelerate launch --multi_gpu --num_processes "$PROCESSES" --num_machines 1 --mixed_precision no
        --dynamo_backend no)
else
    launch=(python)
fi
"${launch[@]}" recipes/train_translation.py recipes/quickstart.yaml \
    --corpus "$CORPUS_DIR" --output_dir "$OUTPUT_DIR" "$@"

step "Translating with the saved model"
sentence="En el principio creó Dios los cielos y la tierra."
echo "$sentence"
echo "$sentence" | hf-graphtf translate --model "$OUTPUT_DIR" --threads 2 --quiet

step "Done in $(($(date +%s) - start)) s: model, tokenizer, model card (README.md) and results.json in $OUTPUT_DIR"
