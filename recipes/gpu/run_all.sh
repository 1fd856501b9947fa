#!/usr/bin/env bash
# The GPU issue in one command (about 5 minutes on an H200, 2026-12-04), for a lease of 15 minutes of device
# time in all (start-up and hand-back included, 10 minutes a command, 8 files back): room to run it once and
# rerun part of it.
# Each step runs under its own time limit; everything lands in $OUT as three files (gpu_results.tar.gz with
# every log, status.txt, machine.txt).
#
#   a. backends, about 20 s: the SDPA backend each attention shape gets with gradients (vanilla's 64/64 and
#      128/128 heads, the link's concat kernel's 128/64 and 256/128) and the cuDNN version
#      (recipes/gpu/sdpa_backends.py);
#   b. correctness, about 1 minute: `hf-graphtf check` on CUDA in bfloat16 (float32 passed in the first
#      lease), and, last, the link's concat kernel against the eager
#      score sum in bf16, with a training step keeping its joins as halves on this device's SDPA kernel
#      (made again in backward, the same gradients, no higher peak);
#   c. sweep, about 1 minute: training throughput, peak memory, ops per step and GPU busy of vanilla, the
#      link and graph half-dim + gate in bf16 at the papers' shape, at 4K, 16K and 32K target tokens a step;
#   d. translation, about 2.5 minutes (70 s with the linked model alone compiled; 141 s did not finish with
#      vanilla compiled too, 2026-12-04): the linked model beside vanilla in fp32 and bf16, eager, and both
#      compiled (static cache) in bf16, greedy and beam 4, batches of 64;
#   e. compiled training, about 1 minute: the sweep's middle budget with every layer compiled;
#   f. choices, about 75 s: at the middle budget, the link on its other kernel (scores), the link
#      keeping its joins for backward (what making them again costs), and the graph layers on each group path:
#      the measurements behind `attention_link_kernel="auto"`, `saved_joins` and
#      `graph_attention.FUSED_PATH_MEASURED` on CUDA.
# The steps run in the order of what a lease most needs (correctness of the fused paths first, the sweep,
# translation, compiled training, the choices, the link kernels' bf16 agreement). On the GPU the whole
# command keeps inside --budget seconds (default 560, for the device tool's 600): a step that would outrun
# it gets what is left, one with under 20 s left is skipped and says so, and an interrupted command still
# packs what it has.
#
# Rehearsal on the CPU (tiny shapes, nothing needs a GPU):   bash recipes/gpu/run_all.sh --dry-run
# On the GPU machine: the device tool's run with command `bash recipes/gpu/run_all.sh`, timeout_s 600 and
# carry [".whl"] (15 MB of wheels, the tracked tree 12 MB: 27 MB of the 64 MiB allowed); the default steps
# need no corpus (the smoke step reads data/bible-es-en: carry it too for --steps=smoke).
# Other steps (not in the default command): --steps=decode (recipes/gpu/decode_profile.py: where a generate
# call's time goes, kernels or host, eager, compiled and with CUDA graphs, at batches of 64 and 256), speed (the papers' shape at its own batch), smoke (the
# training script under accelerate: train, checkpoint, resume), fsdp and grid (longer slots).
# Here, once (network), to fill .whl for the GPU machine's Python (3.12) from recipes/gpu/wheels.txt:
#   bash recipes/gpu/run_all.sh --fetch-wheels
set -uo pipefail
cd "$(dirname "$0")/../.."

DRY_RUN=0
STEPS="backends correctness sweep translation compiled choices"
BUDGET=""
for arg in "$@"; do
    case "$arg" in
        --dry-run) DRY_RUN=1 ;;
        --budget=*) BUDGET="${arg#--budget=}" ;;
        --steps=*) STEPS="${arg#--steps=}"; STEPS="${STEPS//,/ }" ;;
        --fetch-wheels)
            python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
                --platform manylinux2014_x86_64 -d .whl -r recipes/gpu/wheels.txt
            exit $? ;;
        *) echo "unknown argument $arg (--dry-run, --budget=SECONDS, --steps=backends,correctness,sweep,translation,decode,compiled,choices,speed,smoke,fsdp,grid, --fetch-wheels)" >&2
           exit 2 ;;
    esac
done

OUT_DIR=${OUT:-runs/gpu}
RESULTS=$OUT_DIR/gpu_results
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
# The limits below are the GPU's (about 8 minutes in all at most); the rehearsal on a 2-core CPU, often
# shared with a training run, checks the plumbing, not the timings, and gets three times as long.
if [ "$DRY_RUN" = 1 ]; then
    DEVICE=cpu; DTYPE=fp32; SIZE=tiny; CHECK_DTYPES="float32"; STEPS_ARGS=(--steps 3 --warmup 1); LIMIT_SCALE=3
    MEMORY=(--memory rss)  # the CPU profiler's peak is slow; on CUDA the scripts read the allocator's peak
    TOKENS=64,128,256; MIDDLE=128; SWEEP_STEPS=(--steps 2 --warmup 1); COMPILER=eager
    TRANSLATION=(--size tiny --vocab 64 --batch-size 8 --steps 1 --warmup 0 --threads 1)
    PROFILE=(--size tiny --vocab 64 --batch-size 8 --warmup 1); LARGE_BATCH=16
    BUDGET=${BUDGET:-100000}  # the rehearsal checks the plumbing, not the timings
else
    DEVICE=cuda; DTYPE=bf16; SIZE=paper; CHECK_DTYPES="bfloat16"; STEPS_ARGS=(--steps 20 --warmup 5)
    LIMIT_SCALE=1; MEMORY=()
    TOKENS=4096,16384,32768; MIDDLE=16384; SWEEP_STEPS=(--steps 10 --warmup 3); COMPILER=inductor
    TRANSLATION=(--batch-size 64 --steps 3 --warmup 1 --threads 1)
    PROFILE=(); LARGE_BATCH=256
    BUDGET=${BUDGET:-560}
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
cp "$RESULTS/machine.txt" "$OUT_DIR/machine.txt"

# run NAME SECONDS COMMAND...: the step's output into its log, its exit status into status.txt; a step gets at
# most what is left of the budget, and is skipped with under 20 s left
run() {
    local name=$1 limit=$(($2 * LIMIT_SCALE))
    shift 2
    local left=$((BUDGET - SECONDS))
    if [ "$left" -lt 20 ]; then
        echo "$name skipped: ${left}s of the ${BUDGET}s budget left" | tee -a "$RESULTS/status.txt"
        return
    fi
    [ "$limit" -le "$left" ] || limit=$left
    echo "== $name (limit ${limit}s): $*"
    local started=$SECONDS
    timeout "$limit" "$@" > "$RESULTS/$name.log" 2>&1
    local code=$?
    echo "$name exit $code after $((SECONDS - started))s" | tee -a "$RESULTS/status.txt"
    tail -n 3 "$RESULTS/$name.log"
}

# pack: what comes back, the tarball, status.txt and machine.txt (three files of the eight allowed)
pack() {
    cp "$RESULTS/status.txt" "$OUT_DIR/status.txt" 2>/dev/null
    tar czf "$OUT_DIR/gpu_results.tar.gz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
    rm -rf "$RESULTS"
    echo "results: $OUT_DIR/gpu_results.tar.gz"
    cat "$OUT_DIR/status.txt" 2>/dev/null
}
trap 'echo "interrupted after ${SECONDS}s" >> "$RESULTS/status.txt"; pack; exit 124' TERM INT

has_step() { [[ " $STEPS " == *" $1 "* ]]; }
SELF_CHECK=(python3 -m hf_graphtf.cli check --device "$DEVICE")

if has_step backends; then  # about 20 s
    run sdpa_backends 30 python3 recipes/gpu/sdpa_backends.py --device "$DEVICE" --dtype "$DTYPE"
fi

if has_step correctness; then  # about 30 s: every family and option against the re-computation, on this device
    for dtype in $CHECK_DTYPES; do
        run "check_$dtype" 50 "${SELF_CHECK[@]}" --dtype "$dtype"
    done
fi

if has_step speed; then  # about 4 minutes
    BENCH=(--device "$DEVICE" --dtype "$DTYPE" --size "$SIZE" --no-progress "${STEPS_ARGS[@]}")
    VARIANTS=al-prev-both,graph-half+gate,graph-self_gate
    run bench_train 100 python3 recipes/benchmarks/train_throughput.py "${BENCH[@]}" "${MEMORY[@]}" --variants "$VARIANTS"
    run bench_generation 120 python3 recipes/benchmarks/generation_throughput.py "${BENCH[@]}" --variants "$VARIANTS"
    run bench_link_kernels 60 python3 recipes/benchmarks/link_implementations.py "${BENCH[@]}" "${MEMORY[@]}" \
        --variants al-prev-both
fi

SWEEP=(recipes/benchmarks/train_throughput.py --device "$DEVICE" --dtype "$DTYPE" --size "$SIZE" --no-progress
    "${SWEEP_STEPS[@]}" "${MEMORY[@]}" --variants al-prev-both,graph-half+gate)
if has_step sweep; then  # about 1 minute: the token budgets users train at, with ops and GPU busy
    run sweep_train 150 python3 "${SWEEP[@]}" --tokens "$TOKENS" --profile
fi

if has_step translation; then  # about 2.5 minutes: the "Fast translation" modes on this device
    run translation 240 python3 recipes/benchmarks/translation_speed.py --device "$DEVICE" --modes fp32,bf16 \
        --compiled "$DTYPE" "${TRANSLATION[@]}"
fi

if has_step decode; then  # about 4 minutes (not in the default command): where a generate call waits, and
    # whether replaying each step as a CUDA graph (its first step eager) lifts it
    DECODE=(python3 recipes/gpu/decode_profile.py --device "$DEVICE" --dtype "$DTYPE" --systems eager,compiled,cuda-graphs)
    run decode_profile 200 "${DECODE[@]}" "${PROFILE[@]}"
    run decode_profile_batch256 160 "${DECODE[@]}" "${PROFILE[@]}" --batch-size "$LARGE_BATCH"
fi

if has_step compiled; then  # about 1 minute: regional torch.compile of the layers in training
    run compiled_train 120 python3 "${SWEEP[@]}" --tokens "$MIDDLE" --compile "$COMPILER"
fi

if has_step choices; then  # about 75 s: the measurements behind the per-device choices, at the middle budget
    run choice_link_scores 45 python3 "${SWEEP[@]}" --tokens "$MIDDLE" --variants al-prev-both --link-kernel scores
    run choice_link_joins 45 python3 "${SWEEP[@]}" --tokens "$MIDDLE" --variants al-prev-both --link-saves joins \
        --profile
    GRAPHS=graph-half+gate,graph-self_gate,graph-shared+gate
    run choice_graph_modules 60 python3 "${SWEEP[@]}" --tokens "$MIDDLE" --variants "$GRAPHS" --graph-path modules
    run choice_graph_fused 60 python3 "${SWEEP[@]}" --tokens "$MIDDLE" --variants "$GRAPHS" --graph-path fused
fi

if has_step correctness; then  # about 30 s: the link's concat kernel against the eager score sum in this dtype
    run link_kernels 45 python3 recipes/gpu/link_kernels_bf16.py --device "$DEVICE" --dtype "$DTYPE" --size "$SIZE"
fi

if has_step smoke; then  # about 1 minute: train, checkpoint, resume, evaluate through accelerate on one device
    corpus=data/bible-es-en
    smoke=(recipes/train_translation.py recipes/quickstart.yaml --train_split train_10k --vocab_size 2000
        --max_train_minutes 5 --eval_steps 10 --save_steps 10 --max_eval_samples 32 --max_test_samples 32
        --logging_steps 5 --generation_max_length 32 --output_dir /tmp/gpu_smoke)
    launch=(accelerate launch --num_processes 1 --num_machines 1 --dynamo_backend no --mixed_precision no)
    if [ "$DRY_RUN" = 1 ]; then
        launch+=(--cpu); smoke+=(--use_cpu true)
    else
        smoke+=(--precision bf16)  # the recipe's own precision flag: the run records it
    fi
    if [ -d "$corpus" ]; then
        rm -rf /tmp/gpu_smoke
        run smoke_train 60 "${launch[@]}" "${smoke[@]}" --max_steps 20
        run smoke_resume 60 "${launch[@]}" "${smoke[@]}" --max_steps 30
        cp /tmp/gpu_smoke/results.json "$RESULTS/smoke_results.json" 2>/dev/null
    else
        echo "smoke: no $corpus (carry it)" | tee -a "$RESULTS/status.txt"
    fi
fi

if has_step fsdp; then  # longer slots only
    fsdp=(recipes/train_translation.py recipes/quickstart.yaml --max_train_minutes 3 --eval_steps 20 --save_steps 20
        --max_eval_samples 64 --max_test_samples 64 --logging_steps 10 --output_dir /tmp/gpu_fsdp --bf16 true)
    run fsdp_train 240 accelerate launch --config_file recipes/accelerate/fsdp.yaml --num_processes 1 "${fsdp[@]}" \
        --max_steps 40
    run fsdp_resume 240 accelerate launch --config_file recipes/accelerate/fsdp.yaml --num_processes 1 "${fsdp[@]}" \
        --max_steps 60
fi

if has_step grid; then  # longer slots only: many small runs share the GPU; what is unfinished resumes later
    run grid 540 python3 recipes/experiments/run_grid.py recipes/experiments/grid_bible_gpu.yaml --jobs 8
    cp recipes/experiments/results_bible_gpu.jsonl "$RESULTS/" 2>/dev/null
fi

trap - TERM INT
pack
