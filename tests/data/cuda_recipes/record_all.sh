#!/usr/bin/env bash
# Records memtui's real CUDA captures with `memtui record` (run on a machine with a GPU and
# torch, from the repository root): bash tests/data/cuda_recipes/record_all.sh OUTDIR
# Each recipe's exit dump is copied to OUTDIR/NAME.pickle (see tests/data/README.md).
set -uo pipefail
out=${1:?usage: record_all.sh OUTDIR}
here=tests/data/cuda_recipes
mkdir -p "$out"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
record() {  # NAME STACKS ALLOC_CONF SCRIPT ARGS...
    local name=$1 stacks=$2 conf=$3; shift 3
    local dir; dir=$(mktemp -d)
    echo "== $name (stacks=$stacks, PYTORCH_CUDA_ALLOC_CONF=$conf)"
    PYTORCH_CUDA_ALLOC_CONF=$conf python3 -m memtui.cli record --out "$dir" --every 0 \
        --stacks "$stacks" -- "$@"
    echo "rc=$?"; ls -la "$dir"
    cp "$(ls "$dir"/*_exit.pickle | tail -1)" "$out/$name.pickle"
}
record cuda_train_leak python "" $here/train.py 8
record cuda_train_all_stacks all "" $here/train.py 3
record cuda_train_expandable python expandable_segments:True $here/train.py 8
record cuda_train_settings python "max_split_size_mb:64,garbage_collection_threshold:0.6,roundup_power2_divisions:4" $here/train.py 8
record cuda_oom_fragmented python "" $here/oom.py fragmented
record cuda_oom_full python "" $here/oom.py full
record cuda_graph_pool python "" $here/graph.py
ls -la "$out"
