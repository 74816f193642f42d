"""What-if benchmark: the replay's agreement with every real snapshot that carries a full
trace, and its speed, each against the open time of the same capture in the same run.

Part 1, for each snapshot of ../shared/data/torch_snapshots and tests/data (the H100
captures) with alloc events: the open
(``load_trace``, reopen cache off: the baseline), the proof (a replay under the recorded
settings, compared with the recording) and a prediction (``expandable_segments:True``),
with the proof's three agreements: allocs at the recorded address, recorded segment
events reproduced, reserved curve.  Goal (issue 26): >= 99% of allocs at their address and
every recorded segment event reproduced.

Part 2, speed at scale (issue 34): each ``--file`` (a real capture the replay proves, such
as the 5M-event H100 loop of tests/data/cuda_recipes/long_loop.py) and a training-like
capture of about ``--events`` trace entries written through the replayed allocator itself
(tests/helpers/replay_snapshots.py, so the proof holds and the whole replay runs), timed the
same way: the proof (the replay under the recorded settings and its comparison) and a
prediction, with the compiled core (``_replay.c``) where built; with ``--reference`` also
the proof by the Python reference (``MEMTUI_PURE_PYTHON=1``, the baseline: one Python step
per event), whose figures must be the same.  Goal: the proof at 1M events per second or
more.

    python benchmarks/bench_whatif.py                     # real captures + 1M events
    python benchmarks/bench_whatif.py --no-real --events 0 --reference \
        --file /data/long_loop_5m.pickle
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SNAPSHOTS = REPO.parent / "shared" / "data" / "torch_snapshots"
H100 = REPO / "tests" / "data"  # recorded by memtui record on an H100
MIB = 1 << 20


def measure(path: Path, reference: bool = False) -> dict | None:
    """Open ``path`` (no reopen cache: the baseline), prove the replay on its busiest
    device and predict ``expandable_segments:True``; ``reference``: also the proof by the
    Python reference, timed (``proof_python_s``) and checked to agree."""
    from memtui.analysis.replay import core
    from memtui.analysis.replay.predict import predict
    from memtui.analysis.replay.proof import prove
    from memtui.analysis.replay.settings import apply_changes, from_capture
    from memtui.loading import load_trace

    start = time.perf_counter()
    trace = load_trace(path, use_cache=False)
    opened = time.perf_counter()
    device = max(trace.meta.device_names, key=lambda d: trace.device_events(d).height)
    proof, run = prove(trace, device)
    if proof.refused:
        return None
    proved = time.perf_counter()
    loop = "compiled" if core.last_fallback is None else f"Python ({core.last_fallback})"
    changed = apply_changes(from_capture(trace.meta.extra.get("allocator_settings")),
                            ["expandable_segments:True"])
    prediction = predict(trace, device, changed, (proof, run))
    predicted = time.perf_counter()
    result = {"events": trace.device_events(device).height, "open_s": opened - start,
              "proof_s": proved - opened, "predict_s": predicted - proved, "proof": proof,
              "saving": prediction.saving, "loop": loop}
    if reference:
        os.environ["MEMTUI_PURE_PYTHON"] = "1"
        try:
            started = time.perf_counter()
            again, _ = prove(trace, device)
            result["proof_python_s"] = time.perf_counter() - started
        finally:
            os.environ.pop("MEMTUI_PURE_PYTHON")
        result["same"] = again == proof
    return result


def training_ops(n_events: int, seed: int = 0) -> list[tuple]:
    """A training loop's requests: parameters kept, then steps of activations allocated
    and freed (some frees completing late, as after record_stream), an empty_cache now and
    then.  About 3 trace entries per alloc/free pair."""
    rng = random.Random(seed)
    ops: list[tuple] = [("alloc", rng.choice((64, 96, 128)) * MIB, 0) for _ in range(24)]
    while len(ops) * 1.6 < n_events:
        live = 24
        for _ in range(rng.randint(40, 80)):
            size = rng.choice((rng.randint(1, 1 << 20), rng.randint(1 << 20, 64 << 20)))
            ops.append(("alloc", size, 0))
            live += 1
        while live > 24:
            ops.append((rng.choice(("free", "free", "free_late")), live - 1))
            live -= 1
        if rng.random() < 0.02:
            ops.append(("empty_cache",))
    return ops


def print_real() -> None:
    files = sorted(SNAPSHOTS.glob("*.p*")) if SNAPSHOTS.is_dir() else []
    if not files:
        print(f"(no real snapshots at {SNAPSHOTS})")
    files += sorted(H100.glob("*.pickle"))
    print("real captures: proof under the recorded settings (times vs the open, same run)")
    print(f"{'capture':<44}{'events':>8}{'allocs@addr':>14}{'segments':>12}{'reserved':>10}"
          f"{'open s':>8}{'proof':>8}{'predict':>9}")
    for path in files:
        result = measure(path)
        if result is None:
            print(f"{path.name:<44}  no alloc events: nothing to replay")
            continue
        p = result["proof"]
        print(f"{path.name:<44}{result['events']:>8}"
              f"{p.allocs_at_address:>7}/{p.allocs:<6}"
              f"{p.segments_reproduced:>5}/{p.segments_recorded:<6}"
              f"{p.reserved_share:>9.1%}"
              f"{result['open_s']:>8.2f}{result['proof_s'] / result['open_s']:>7.1f}x"
              f"{result['predict_s'] / result['open_s']:>8.1f}x"
              + ("" if p.holds else f"  NOT PROVEN: {p.why_not()}"))


def print_validation() -> None:
    """Predictions from the default run of train.py 8 (tests/data/cuda_train_leak) against
    the same program recorded on the H100 with the setting."""
    import polars as pl

    from memtui.analysis.replay.predict import predict
    from memtui.analysis.replay.settings import Settings, apply_changes, from_capture
    from memtui.loading import load_trace
    from memtui.units import format_bytes

    default = H100 / "cuda_train_leak.pickle"
    if not default.is_file():
        return
    print("\npredicted from the default run vs recorded with the setting (H100, train.py 8)")
    levels = ("alloc", "free_requested", "free")
    base = load_trace(default, use_cache=False)
    ours = base.device_events("cuda:0").sort("seq")
    at_level = ours["action"].cast(str).is_in(levels).to_numpy()
    for name in ("cuda_train_expandable.pickle", "cuda_train_settings.pickle"):
        actual = load_trace(H100 / name, use_cache=False)
        setting = from_capture(actual.meta.extra["allocator_settings"]).describe()
        p = predict(base, "cuda:0", apply_changes(Settings(), [setting]))
        theirs = actual.device_events("cuda:0").sort("seq")
        recorded = theirs.filter(pl.col("action").cast(str).is_in(levels))["reserved"]
        curve = p.curve[at_level]
        agree = (curve == recorded.to_numpy()).mean() if curve.size == recorded.len() else 0.0
        segments = theirs.filter(pl.col("action").cast(str).str.starts_with("segment")).height
        print(f"  {setting}\n    peak {format_bytes(p.predicted.reserved_peak)} predicted, "
              f"{format_bytes(int(recorded.max()))} recorded; reserved after every alloc/free "
              f"{agree:.1%} equal; cudaMalloc/maps {p.predicted.cuda_malloc} vs {segments}")


def print_scale(path: Path, reference: bool, written: str = "") -> None:
    result = measure(path, reference)
    if result is None:
        print(f"\n{path.name}: no alloc events, nothing to replay")
        return
    p = result["proof"]
    n = result["events"]
    print(f"\nscale: {path.name if not written else 'a training loop'}, {n:,} events"
          f"{written}; replayed by the {result['loop']} loop")
    print(f"  open {result['open_s']:.2f} s (baseline); proof {result['proof_s']:.2f} s "
          f"({result['proof_s'] / result['open_s']:.2f}x the open, "
          f"{n / result['proof_s']:,.0f} events/s: "
          f"{'within' if n / result['proof_s'] >= 1e6 else 'UNDER'} the goal of 1M); "
          f"prediction {result['predict_s']:.2f} s ({n / result['predict_s']:,.0f} events/s)")
    if "proof_python_s" in result:
        python = result["proof_python_s"]
        print(f"  the Python reference's proof {python:.1f} s ({n / python:,.0f} events/s): "
              f"the core {python / result['proof_s']:.0f}x faster; the same proof: "
              f"{'yes' if result['same'] else 'NO'}")
    print(f"  agreement: {p.address_share:.2%} allocs at address, "
          f"{p.segments_reproduced}/{p.segments_recorded} segment events, "
          f"reserved {p.reserved_share:.2%}")


def print_generated(n_events: int, reference: bool) -> None:
    from tests.helpers.replay_snapshots import write_ops

    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        path = write_ops(Path(folder) / "training.pickle", training_ops(n_events))
        written = time.perf_counter() - start
        print_scale(path, reference, f" written through the replay in {written:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="a generated training loop of about this many events (0: none)")
    parser.add_argument("--file", type=Path, nargs="*", default=[],
                        help="real captures to time the replay on (the 5M-event H100 loop)")
    parser.add_argument("--reference", action="store_true",
                        help="also time the Python reference's proof (the baseline)")
    parser.add_argument("--no-real", action="store_true")
    args = parser.parse_args()
    if not args.no_real:
        print_real()
        print_validation()
    for path in args.file:
        print_scale(path, args.reference)
    if args.events:
        print_generated(args.events, args.reference)


if __name__ == "__main__":
    main()
