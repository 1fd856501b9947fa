#!/usr/bin/env bash
# The main job: from a fresh machine to a trained and evaluated attention-link translation model.
#
#   bash recipes/run_main_job.sh                  # the full quickstart (about 15 minutes on 2 CPU cores)
#   bash recipes/run_main_job.sh --max_steps 20   # extra flags override recipes/quickstart.yaml
#
# 1. installs what is missing: the SWORD Bible modules (Debian packages), PyTorch and this package
#    (into the active virtualenv, or ./.venv, created if needed);
# 2. builds the offline Bible es-en corpus in data/bible-es-en;
# 3. trains recipes/quickstart.yaml into outputs/quickstart (running again resumes there;
#    delete the folder to start over) and prints test BLEU/chrF and sample translations.
set -euo pipefail
cd "$(dirname "$0")/.."

CORPUS_DIR=${CORPUS_DIR:-data/bible-es-en}
OUTPUT_DIR=${OUTPUT_DIR:-outputs/quickstart}
SWORD_PACKAGES=(sword-text-sparv sword-text-web sword-text-kjv)
# One intra-op thread per process: on the 2-core machine the quickstart was measured on, two threads
# made a training step three times slower. Export OMP_NUM_THREADS to choose otherwise.
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
    "${sudo[@]}" apt-get update
    "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
else
    echo "installed: ${SWORD_PACKAGES[*]}"
fi

step "Python environment"
if [ -z "${VIRTUAL_ENV:-}" ]; then
    [ -d .venv ] || python3 -m venv .venv
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
echo "using $(command -v python)"
python -m pip install --quiet torch==2.13.0
python -m pip install --quiet -c constraints.txt -e .

step "Corpus: $CORPUS_DIR"
hf-graphtf build-corpus --output-dir "$CORPUS_DIR" >/dev/null
wc -l "$CORPUS_DIR"/*.jsonl

step "Training recipes/quickstart.yaml into $OUTPUT_DIR"
python recipes/train_translation.py recipes/quickstart.yaml \
    --corpus "$CORPUS_DIR" --output_dir "$OUTPUT_DIR" "$@"

step "Translating with the saved model"
sentence="En el principio creó Dios los cielos y la tierra."
echo "$sentence"
echo "$sentence" | hf-graphtf translate --model "$OUTPUT_DIR" --quiet

step "Done in $(($(date +%s) - start)) s: model, tokenizer, model card (README.md) and results.json in $OUTPUT_DIR"
