"""Open-time benchmark: memtui against the bare read of the same file, paired, in one run.

PyTorch snapshots: for each size it writes a synthetic snapshot with
``benchmarks/generate.py``, then, ``--repeat`` rounds of each of these in turn (a fresh
process each, so every figure is a whole process as a user runs it; the readers take
turns, so the drift of a shared machine hits them alike), and prints medians:

* ``pickle.load``: the bare read of the file, collector on, as anyone would call it
  (the baseline);
* ``pickle.load, gc off``: the same with Python's cyclic collector disabled;
* ``summary``: ``memtui summary --no-cache`` (import, load, every figure, print);
* ``first``: ``memtui summary`` with an empty cache (what a user's first open costs,
  the cache entry written in the background included);
* ``reopen``: ``memtui summary`` again, the cache now warm;
* ``paint``: the TUI from a fresh interpreter's first line to the Trend screen's first
  full paint, without the cache (``benchmarks/bench_ui.py``'s measure: the app runs
  headless, the process prints the time it painted).

It prints wall seconds, the ratios to ``pickle.load`` (goals: summary <= 0.8x, first paint
<= 1.0x, reopen <= 0.1x of first), CPU seconds (less noisy on a shared machine), seconds
per million events (linear growth: about constant across sizes) and the peak RSS beyond the
bare read per event (goal: under 150 B).  memtui runs with its compiled bytecode kept, as an
installed package has it (``bytecode_like_an_install``).

msMemScope DBs: ``benchmarks/bench_open_memscope.py`` (section 2 below).

    python benchmarks/bench_open.py                          # 1M, 2M, 4M events
    python benchmarks/bench_open.py --events 1000000 2000000 --repeat 3 --memscope-rows
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.processes import run_process  # noqa: E402

_BARE = "import pickle, sys\nwith open(sys.argv[1], 'rb') as fh:\n    pickle.load(fh)\n"
_BARE_NOGC = "import gc\ngc.disable()\n" + _BARE


def readers(path: Path, cache_home: Path) -> dict[str, tuple[list[str], dict | None]]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home), "PYTHONPATH": str(REPO)}
    memtui = [sys.executable, "-m", "memtui.cli", "summary"]
    return {
        "bare": ([sys.executable, "-c", _BARE, str(path)], None),
        "bare_nogc": ([sys.executable, "-c", _BARE_NOGC, str(path)], None),
        "summary": ([*memtui, "--no-cache", str(path)], env),
        "first": ([*memtui, str(path)], env),
        "reopen": ([*memtui, str(path)], env),
    }


def paired(path: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Medians of ``repeat`` rounds, each round every reader once, in turn."""
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as cache_home:
        for _ in range(repeat):
            subprocess.run([sys.executable, "-m", "memtui.cli", "cache", "clear"], cwd=REPO,
                           env={**os.environ, "XDG_CACHE_HOME": cache_home,
                                "PYTHONPATH": str(REPO)},
                           stdout=subprocess.DEVNULL, check=True)
            for what, (argv, env) in readers(path, Path(cache_home)).items():
                runs.setdefault(what, []).append(run_process(argv, env))
            runs.setdefault("paint", []).append(first_paint(path))
    return {what: {k: statistics.median(r[k] for r in done) for k in done[0]}
            for what, done in runs.items()}


def first_paint(path: Path) -> dict:
    """Wall and CPU seconds from a fresh interpreter's first line to the TUI's first full
    paint of ``path``, without the reopen cache."""
    from benchmarks.bench_ui import process_paint

    wall, cpu = process_paint(path, cache=False)
    return {"wall": wall, "cpu": cpu}


def bench_snapshot(n_events: int, repeat: int, folder: Path) -> dict:
    from benchmarks.generate import write_snapshot

    path = folder / f"bench_{n_events}.pickle"
    if not path.exists():  # written whole or not at all (a run stopped midway)
        partial = write_snapshot(folder / f"bench_{n_events}.pickle.partial", n_events=n_events)
        partial.rename(path)
    m = paired(path, repeat)
    bare = m["bare"]
    return {
        "events": n_events, "file_mb": path.stat().st_size / 1e6, **{
            f"{what}_{k}": v for what, figures in m.items() for k, v in figures.items()},
        "summary_ratio": m["summary"]["wall"] / bare["wall"],
        "summary_cpu_ratio": m["summary"]["cpu"] / bare["cpu"],
        "nogc_ratio": m["bare_nogc"]["wall"] / bare["wall"],
        "first_ratio": m["first"]["wall"] / bare["wall"],
        "paint_ratio": m["paint"]["wall"] / bare["wall"],
        "paint_cpu_ratio": m["paint"]["cpu"] / bare["cpu"],
        "reopen_of_first": m["reopen"]["wall"] / m["first"]["wall"],
        "reopen_cpu_of_first": m["reopen"]["cpu"] / m["first"]["cpu"],
        "s_per_m": m["summary"]["wall"] / (n_events / 1e6),
        "extra_b_per_event": (m["summary"]["rss"] - bare["rss"]) / n_events,
    }


def print_header() -> None:
    print("PyTorch snapshots: medians of paired runs, whole processes (wall s; CPU s in [])")
    print(f"{'events':>9} {'MB':>5} | {'pickle.load':>13} {'gc off':>6} | {'summary':>13} "
          f"{'ratio':>5} {'[cpu]':>5} | {'paint':>6} {'ratio':>5} {'[cpu]':>5} | {'first':>6} "
          f"{'reopen':>6} {'re/first':>8} {'[cpu]':>5} | {'s/M ev':>6} {'extra B/ev':>10}",
          flush=True)


def print_snapshots(results: list[dict]) -> None:
    for r in results:
        print(f"{r['events']:>9} {r['file_mb']:>5.0f} | {r['bare_wall']:>6.2f} "
              f"[{r['bare_cpu']:>5.2f}] {r['nogc_ratio']:>5.2f}x | {r['summary_wall']:>6.2f} "
              f"[{r['summary_cpu']:>5.2f}] {r['summary_ratio']:>4.2f}x "
              f"{r['summary_cpu_ratio']:>4.2f}x | {r['paint_wall']:>6.2f} "
              f"{r['paint_ratio']:>4.2f}x {r['paint_cpu_ratio']:>4.2f}x | {r['first_wall']:>6.2f} "
              f"{r['reopen_wall']:>6.2f} {r['reopen_of_first']:>7.3f}x "
              f"{r['reopen_cpu_of_first']:>4.2f}x | {r['s_per_m']:>6.2f} "
              f"{r['extra_b_per_event']:>10.0f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*",
                        default=[1_000_000, 2_000_000, 4_000_000])
    parser.add_argument("--memscope-rows", type=int, nargs="*", default=[])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians are printed)")
    parser.add_argument("--keep", type=Path, help="keep generated inputs in this folder")
    args = parser.parse_args()
    pycache = tempfile.TemporaryDirectory()  # bytecode, as an installed memtui keeps it
    from benchmarks.bench_ui import bytecode_like_an_install

    bytecode_like_an_install(pycache.name)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.events:
            print_header()
        for n_events in args.events:
            print_snapshots([bench_snapshot(n_events, args.repeat, folder)])
        if args.events:
            print("goals: summary <= 0.80x pickle.load; paint <= 1.00x pickle.load; reopen "
                  "<= 0.10x first; s/M constant (linear); extra <= 150 B/event")
    if args.memscope_rows:
        print(flush=True)  # the msMemScope benchmark, in a process of its own
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_open_memscope.py"),
                        "--rows", *map(str, args.memscope_rows),
                        "--repeat", str(args.repeat)], cwd=REPO, check=True)


if __name__ == "__main__":
    main()
