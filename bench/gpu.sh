#!/usr/bin/env bash
# The GPU measurements bench/RESULTS.md asks for, in one go, within 9 minutes on a 16-core GPU machine; or, with
# `course`, the smoke course with the GPU visible, within 8 minutes.
#
#   OUT=/some/folder bash bench/gpu.sh          # default OUT: bench/results/gpu
#   OUT=/some/folder bash bench/gpu.sh course   # every chapter in smoke mode; the chapters pick CUDA themselves
#   GPU_SH_TINY=1 OUT=/tmp/x bash bench/gpu.sh [course]   # the same on CPU, tiny settings (a check it runs)
#
# Steps, each under its own time limit so the whole stays under 9 minutes (the limits add up to 520 s);
# every step saves its results under $OUT as it goes, so a step cut short keeps what it measured:
#   1. bench.py, EfficientNet-B0 256 px batch 64, the course's settings (fp32; bf16 + channels_last),
#      all three loops in one process, 3 interleaved rounds of 60 steps            (limit 150 s)
#   2. bench.py, the same two settings compiled (chapter 07), 1 round of 30 steps;
#      the first step, which holds the compilation, is reported on its own           (limit 150 s)
#   3. epoch.py, one epoch of each pipeline on 16,384 generated JPEGs at batch 256   (limit 100 s)
#   4. profile_engine.py, the engine against the reference under torch.profiler    (limit 50 s)
#   5. loader.py, every pipeline alone with 8 and 16 workers                        (limit 70 s)
# `course` (limit 470 s): course-book run-notebooks --smoke, the executed notebooks and summary.json in
# $OUT/course; chapter 08 stops in one line where torch_xla is missing, as on Colab's GPU runtime.
# Python packages: when the folder named by $WHEELS (default .whl) holds wheels, they are installed
# into a temporary folder first (a machine without the internet).
set -u
OUT=${OUT:-bench/results/gpu}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT"
LOG="$OUT/gpu.log"

log() { echo "[gpu.sh $(date +%T)] $*" | tee -a "$LOG"; }

step() {  # step LIMIT_SECONDS COMMAND...: run one measurement under its limit, log its exit status
    local limit=$1
    shift
    log "start (limit ${limit} s): $*"
    timeout --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    log "exit $rc: $1 $2"
}

if compgen -G "$WHEELS/*.whl" >/dev/null; then
    log "installing $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS"
    pip install -q --no-deps --target /tmp/gpu-sh-site "$WHEELS"/*.whl >>"$LOG" 2>&1
    export PYTHONPATH="/tmp/gpu-sh-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
PY=${PYTHON:-python}
$PY -c "import torch, platform; print('python', platform.python_version(), 'torch', torch.__version__, \
'gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)" | tee -a "$LOG"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOG" 2>&1 || true

if [ "${1:-}" = course ]; then
    ONLY=()
    [ "${GPU_SH_TINY:-0}" = 1 ] && ONLY=(--only 00)
    step 470 $PY -c "import sys; from course_lib.book.cli import main; sys.exit(main(sys.argv[1:]))" \
        run-notebooks --smoke --out "$OUT/course" --timeout 400 "${ONLY[@]}"
    log "done; the executed notebooks and summary.json in $OUT/course"
    exit 0
fi

if [ "${GPU_SH_TINY:-0}" = 1 ]; then
    BENCH=(--device cpu --arch resnet18 --img-size 32 --batch-size 4 --steps 2 --warmup 1 --rounds 1
        --only 32 "32, accumulate 2")
    COMPILED=(--device cpu --arch resnet18 --img-size 32 --batch-size 4 --steps 2 --warmup 1 --rounds 1
        --only 32 "32 + compile" --loops reference)  # compiling ResNet-18 takes a minute a loop on 2 cores
    EPOCH=(--device cpu --n 24 --file-size 64 --img-size 32 --batch-size 8 --workers 1 --arch resnet18)
    PROFILE=(--device cpu --arch resnet18 --img-size 32 --batch-size 4 --steps 2 --rounds 1)
    LOADER=(--n 40 --file-size 64 --img-size 32 --batch-size 8 --workers 0 1 --rounds 1)
else
    BENCH=(--device cuda --in-process --arch efficientnet-b0 --img-size 256 --batch-size 64
        --steps 60 --warmup 10 --rounds 3 --only 32 "bf16-mixed + channels_last")
    COMPILED=(--device cuda --in-process --arch efficientnet-b0 --img-size 256 --batch-size 64
        --steps 30 --warmup 5 --rounds 1 --only 32 "32 + compile" "bf16-mixed + channels_last"
        "bf16-mixed + channels_last + compile")
    EPOCH=(--device cuda --n 16384 --workers 16 --batch-size 256 --img-size 256)
    PROFILE=(--device cuda --arch efficientnet-b0 --img-size 256 --batch-size 64 --steps 20 --rounds 1)
    LOADER=(--n 4096 --img-size 256 --batch-size 64 --workers 8 16 --rounds 1)
fi
CACHE="$OUT/.data"  # generated JPEGs, removed at the end

step 150 $PY bench/bench.py "${BENCH[@]}" --out "$OUT"
step 150 $PY bench/bench.py "${COMPILED[@]}" --out "$OUT/compiled"
step 100 $PY bench/epoch.py "${EPOCH[@]}" --cache "$CACHE" --out "$OUT"
step 50 $PY bench/profile_engine.py "${PROFILE[@]}" --out "$OUT"
step 70 $PY bench/loader.py "${LOADER[@]}" --cache "$CACHE" --out "$OUT"
rm -rf "$CACHE"
log "done; results in $OUT"
