#!/usr/bin/env bash
# Records the fourth wave's real CUDA captures with `memtui record` (a machine with a GPU and
# torch, from the repository root): bash tests/data/cuda_recipes/record_wave4.sh OUTDIR
# Small captures (and the roles' truth files) go to OUTDIR/small/; the long loop to
# OUTDIR/long_loop_5m.pickle.
set -uo pipefail
out=${1:?usage: record_wave4.sh OUTDIR}
here=tests/data/cuda_recipes
mkdir -p "$out/small"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
record() {  # NAME CONF MAX_ENTRIES SCRIPT ARGS...
    local name=$1 conf=$2 entries=$3; shift 3
    local dir; dir=$(mktemp -d)
    echo "== $name (PYTORCH_CUDA_ALLOC_CONF=$conf)"
    local start=$SECONDS
    PYTORCH_CUDA_ALLOC_CONF=$conf python3 -m memtui.cli record --out "$dir" --every 0 \
        --max-entries "$entries" -- "$@"
    echo "rc=$? in $((SECONDS - start)) s"; ls -la "$dir"
    cp "$(ls "$dir"/*_exit.pickle | tail -1)" "$out/$name.pickle"
    for oom in "$dir"/*oom*.pickle; do [ -e "$oom" ] && cp "$oom" "$out/${name}_oom.pickle"; done
}
cd_small() { mv "$out/$1.pickle" "$out/small/"; }
record cuda_roles_adamw "" 100000 $here/roles.py adamw "$out/small/cuda_roles_adamw.truth.json"
record cuda_roles_late "" 100000 $here/roles.py late "$out/small/cuda_roles_late.truth.json"
record cuda_roles_handopt "" 100000 $here/roles.py handopt "$out/small/cuda_roles_handopt.truth.json"
record cuda_moe_leak "" 100000 $here/moe_leak.py 80
record cuda_expandable_oom expandable_segments:True 100000 $here/expandable_oom.py
for f in "$out"/*.pickle; do mv "$f" "$out/small/"; done
record long_loop_5m "" 6000000 $here/long_loop.py 5000000
ls -la "$out" "$out/small"
