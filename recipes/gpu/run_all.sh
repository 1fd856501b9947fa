#!/usr/bin/env bash
# Everything the GPU issue needs, in order of value, each step under its own time limit, all results in
# one tarball. Built for one H100/H200 lease of about 30 minutes on a machine with no network: what its
# image lacks travels as wheels (.whl) and the Bible corpus as a folder (data/bible-es-en).
#
# Here, once (network), to fill .whl for the GPU machine's Python (3.12):
#   bash recipes/gpu/run_all.sh --fetch-wheels
# Rehearsal on the CPU (small shapes, no FSDP, a one-step grid; nothing needs a GPU):
#   bash recipes/gpu/run_all.sh --dry-run
# On the GPU machine (the device tool carries .whl and data/bible-es-en; $OUT comes back), one call
# per step, since one call may take 10 minutes at most:
#   bash recipes/gpu/run_all.sh --steps=1    # then --steps=2, --steps=3, --steps=4
#
# Steps: 1 correctness on CUDA (SPEC re-computation and cached-vs-uncached generation, float64 and
# float32; the link's concat kernel against the eager score sum in bf16), 2 speed and memory of every
# variant against vanilla in bf16 (recipes/benchmarks), 3 FSDP and DDP through the training script on
# one GPU (train, checkpoint, resume, evaluate), 4 as much of grid_bible_gpu.yaml as fits (resumable).
set -uo pipefail
cd "$(dirname "$0")/../.."

DRY_RUN=0
STEPS="1 2 3 4"
for arg in "$@"; do
    case "$arg" in
        --dry-run) DRY_RUN=1 ;;
        --steps=*) STEPS="${arg#--steps=}"; STEPS="${STEPS//,/ }" ;;
        --fetch-wheels)
            # datasets and what it needs beyond the image, sacremoses and evaluate: pure-Python wheels
            python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
                --platform manylinux2014_x86_64 -d .whl -r recipes/gpu/wheels.txt
            exit $? ;;
        *) echo "unknown argument $arg (--dry-run, --steps=1,2, --fetch-wheels)" >&2; exit 2 ;;
    esac
done

RESULTS=${OUT:-runs/gpu}/gpu_results
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
if [ "$DRY_RUN" = 1 ]; then
    DEVICE=cpu; DTYPE=fp32; SIZE=tiny; GRID_LIMIT=120
else
    DEVICE=cuda; DTYPE=bf16; SIZE=paper; GRID_LIMIT=540
    if ls .whl/*.whl >/dev/null 2>&1; then  # what the GPU image lacks, installed beside it
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/*.whl || exit 1
        export PYTHONPATH=/tmp/site
    fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
    date -u +"%Y-%m-%d %H:%M UTC"
    git rev-parse HEAD 2>/dev/null || echo "no git"
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
} > "$RESULTS/machine.txt"

# run NAME SECONDS COMMAND...: the step's output into its log, its exit status into status.txt
run() {
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit}s): $*"
    local started=$SECONDS
    timeout "$limit" "$@" > "$RESULTS/$name.log" 2>&1
    local code=$?
    echo "$name exit $code after $((SECONDS - started))s" | tee -a "$RESULTS/status.txt"
    tail -n 5 "$RESULTS/$name.log"
}

has_step() { [[ " $STEPS " == *" $1 "* ]]; }

if has_step 1; then
    if [ "$DRY_RUN" = 1 ]; then
        run correctness_float64 300 python3 -m pytest -q -p no:cacheprovider tests/test_models.py -k "spec and sdpa and al-both"
    else
        HF_GRAPHTF_TEST_DEVICE=cuda run correctness_float64 300 \
            python3 -m pytest -q -p no:cacheprovider tests/test_models.py -k "spec or cached"
        HF_GRAPHTF_TEST_DEVICE=cuda HF_GRAPHTF_TEST_DTYPE=float32 run correctness_float32 300 \
            python3 -m pytest -q -p no:cacheprovider tests/test_models.py -k "spec or cached"
    fi
    run link_kernels 120 python3 recipes/gpu/link_kernels_bf16.py --device "$DEVICE" --dtype "$DTYPE" --size "$SIZE"
fi

if has_step 2; then
    for script in train_throughput generation_throughput link_implementations length_scaling; do
        run "bench_$script" 540 python3 "recipes/benchmarks/$script.py" --device "$DEVICE" --dtype "$DTYPE" \
            --size "$SIZE" --no-progress
    done
fi

if has_step 3; then
    corpus=data/bible-es-en
    common=(recipes/train_translation.py recipes/quickstart.yaml --max_train_minutes 3 --eval_steps 20 --save_steps 20
        --max_eval_samples 64 --max_test_samples 64 --logging_steps 10)
    if [ "$DRY_RUN" = 1 ]; then
        echo "== fsdp / ddp: need a GPU (accelerate applies FSDP to accelerator runs only); skipped in the rehearsal"
    elif [ -d "$corpus" ]; then
        run fsdp_train 240 accelerate launch --config_file recipes/accelerate/fsdp.yaml --num_processes 1 \
            "${common[@]}" --max_steps 40 --output_dir /tmp/gpu_fsdp --bf16 true
        run fsdp_resume 240 accelerate launch --config_file recipes/accelerate/fsdp.yaml --num_processes 1 \
            "${common[@]}" --max_steps 60 --output_dir /tmp/gpu_fsdp --bf16 true
        cp /tmp/gpu_fsdp/results.json "$RESULTS/fsdp_results.json" 2>/dev/null
        run ddp_train 240 accelerate launch --config_file recipes/accelerate/ddp.yaml --num_processes 1 \
            "${common[@]}" --max_steps 40 --output_dir /tmp/gpu_ddp --bf16 true
    else
        echo "== fsdp / ddp: no $corpus (carry it)" | tee -a "$RESULTS/status.txt"
    fi
fi

if has_step 4; then
    if [ "$DRY_RUN" = 1 ]; then
        run grid 300 python3 recipes/experiments/run_grid.py recipes/experiments/grid_bible_gpu.yaml --dry-run
    else
        # many small runs share the GPU; what is unfinished at the limit resumes in a later lease
        run grid "$GRID_LIMIT" python3 recipes/experiments/run_grid.py recipes/experiments/grid_bible_gpu.yaml --jobs 8
        cp recipes/experiments/results_bible_gpu.jsonl "$RESULTS/" 2>/dev/null
    fi
fi

tar czf "${OUT:-runs/gpu}/gpu_results.tar.gz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
echo "results: ${OUT:-runs/gpu}/gpu_results.tar.gz"
cat "$RESULTS/status.txt" 2>/dev/null
