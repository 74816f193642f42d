"""Snapshot reader benchmark (issue 25): the compiled reader against ``pickle.load`` and the
Python reader, whole processes, paired in one run.

For each size it writes (or reuses, with ``--keep``) a synthetic snapshot with
``benchmarks/generate.py``, then ``--repeat`` rounds of, in turn (a shared machine's drift
hits them alike), each a fresh process:

* ``pickle.load``: the bare read of the file, collector on (the baseline);
* ``summary``: ``memtui summary --no-cache`` with the compiled reader;
* ``summary (Python)``: the same with ``MEMTUI_PURE_PYTHON=1`` (``--no-python`` skips it:
  at 20M events it needs about as much memory as ``pickle.load``);
* ``paint``: the TUI's first full paint without the cache (bench_ui.py's measure), compiled.

It prints medians of wall and CPU seconds, the ratios to ``pickle.load`` (goals: summary
<= 0.5x, paint <= 0.6x), peak RSS as a multiple of the file's size (goal <= 2.5x) and
seconds per million events (linear growth: about constant across sizes).  CPU ratios are
printed too: on a machine shared with other work they are the steadier figure.

Measured 2026-11-26 on the 2-core machine (one test run beside it part of the time),
medians of 3 rounds at 1M and 5M events, 1 round at 20M:

    events  MB | pickle.load        | summary, compiled     | Python reader | paint, compiled
    1M      60 | 2.65 s [2.6] 6.8xF | 0.87x [0.88x]   6.9xF | 1.74x   8.8xF | 0.81x [0.83x]
    5M     300 | 9.13 s [9.0] 6.7xF | 0.57x [0.61x]   4.5xF | 1.39x   7.8xF | 0.54x [0.57x]
    20M   1200 | 37.4 s [37]  6.7xF | 0.58x [0.59x]   3.9xF | (skipped)     | 0.59x [0.60x]

(wall ratio to pickle.load [CPU ratio], peak RSS per file byte.)  Summary seconds per
million events 2.31 / 1.04 / 1.08: linear past the fixed cost of the imports.  Keys at 20M
(``--keys 10``, median): Blocks 32 ms, Stacks 32 ms, Pool 81 ms (its cursor lays out the
blocks alive at the event: numpy over them, then the map's paint; measured while the
start-up analyses still run).  Before this wave's builder work (same machine, loaded):
summary 0.78x, paint 1.14x at 5M.

    python benchmarks/bench_reader.py --events 1000000 5000000 --repeat 1 --keep /tmp/snaps
    python benchmarks/bench_reader.py --events 20000000 --repeat 1 --no-python --keep /tmp/snaps \
        --keys 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_open import _BARE, first_paint  # noqa: E402
from benchmarks.processes import run_process  # noqa: E402


def _snapshot(n_events: int, folder: Path) -> Path:
    from benchmarks.generate import write_snapshot

    path = folder / f"bench_{n_events}.pickle"
    if not path.exists():  # written whole or not at all
        write_snapshot(folder / f"bench_{n_events}.pickle.partial", n_events=n_events).rename(
            path)
    return path


def _commands(path: Path, cache_home: str, python: bool) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": cache_home, "PYTHONPATH": str(REPO),
           "MEMTUI_PURE_PYTHON": "0"}
    summary = [sys.executable, "-m", "memtui.cli", "summary", "--no-cache", str(path)]
    commands = {"bare": ([sys.executable, "-c", _BARE, str(path)], None),
                "summary": (summary, env)}
    if python:
        commands["python"] = (summary, {**env, "MEMTUI_PURE_PYTHON": "1"})
    return commands


def bench(n_events: int, repeat: int, folder: Path, python: bool, paint: bool) -> dict:
    path = _snapshot(n_events, folder)
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as cache_home:
        for _ in range(repeat):
            for what, (argv, env) in _commands(path, cache_home, python).items():
                runs.setdefault(what, []).append(run_process(argv, env))
            if paint:  # the compiled reader (process_paint takes this process's env)
                os.environ["MEMTUI_PURE_PYTHON"] = "0"
                runs.setdefault("paint", []).append(first_paint(path))
    m = {what: {k: statistics.median(r[k] for r in done) for k in done[0]}
         for what, done in runs.items()}
    size = path.stat().st_size
    return {"events": n_events, "bytes": size, "m": m}


def _fmt(figures: dict | None, bare: dict, size: int) -> str:
    if figures is None:
        return f"{'-':>30}"
    wall, cpu = figures["wall"], figures["cpu"]
    text = (f"{wall:>6.2f} [{cpu:>6.2f}] {wall / bare['wall']:>4.2f}x"
            f" [{cpu / bare['cpu']:>4.2f}x]")
    if "rss" in figures:
        text += f" {figures['rss'] / size:>4.1f}xF"
    return text


def print_row(r: dict) -> None:
    m, size = r["m"], r["bytes"]
    bare = m["bare"]
    print(f"{r['events']:>9} {size / 1e6:>6.0f} | {bare['wall']:>6.2f} [{bare['cpu']:>6.2f}] "
          f"{bare['rss'] / size:>4.1f}xF | summary {_fmt(m['summary'], bare, size)} | "
          f"Python {_fmt(m.get('python'), bare, size)} | paint {_fmt(m.get('paint'), bare, size)}"
          f" | {m['summary']['wall'] / (r['events'] / 1e6):>5.2f} s/M "
          f"[{m['summary']['cpu'] / (r['events'] / 1e6):>5.2f}]", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 2_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians are printed)")
    parser.add_argument("--keep", type=Path, help="keep generated inputs in this folder")
    parser.add_argument("--no-python", action="store_true", help="skip the Python reader")
    parser.add_argument("--no-paint", action="store_true", help="skip the TUI's first paint")
    parser.add_argument("--keys", type=int, default=0, metavar="PRESSES",
                        help="also time PRESSES key presses per key on the Blocks, Pool and "
                             "Stacks screens (bench_ui.py's measure, in this process)")
    args = parser.parse_args()
    pycache = tempfile.TemporaryDirectory()
    from benchmarks.bench_ui import bytecode_like_an_install

    bytecode_like_an_install(pycache.name)
    # compile memtui's bytecode once, outside the timings (an install has it compiled)
    run_process([sys.executable, "-m", "memtui.cli", "summary", "--no-cache",
                 str(REPO / "snapshots" / "demo_oom.pickle")],
                {**os.environ, "PYTHONPATH": str(REPO)})
    first_paint(REPO / "snapshots" / "demo_oom.pickle")
    print("Snapshot readers: medians of paired runs, whole processes: wall s [CPU s], ratio to "
          "pickle.load [CPU ratio], peak RSS as a multiple of the file (xF)")
    print(f"{'events':>9} {'MB':>6} | {'pickle.load':>22} | ...")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for n_events in args.events:
            print_row(bench(n_events, args.repeat, folder, not args.no_python,
                            not args.no_paint))
        for n_events in args.events if args.keys else ():
            print_keys(n_events, _snapshot(n_events, folder), args.keys)
    print("goals: summary <= 0.50x pickle.load; paint <= 0.60x; summary peak <= 2.5xF; "
          "s/M about constant from 1M to 20M (linear); Blocks, Pool and Stacks keys "
          "< 50 ms median")


#: The screens whose keys issue 25 times on the biggest snapshot.
KEY_SCREENS = ("Blocks", "Pool", "Stacks")


def print_keys(n_events: int, path: Path, presses: int) -> None:
    """The slowest key median of each of :data:`KEY_SCREENS` (key to painted frame, the
    app headless at 120x40 with this run's own cache), and each key's median and p95."""
    import asyncio

    from benchmarks.bench_ui import run_app

    with tempfile.TemporaryDirectory() as cache_home:
        os.environ["XDG_CACHE_HOME"] = cache_home
        results = asyncio.run(run_app(path, (120, 40), presses))
    print(f"keys at {n_events:,} events (first paint in process "
          f"{results['first_paint']:.1f} s): median / p95 ms, key to painted frame")
    for screen in KEY_SCREENS:
        rows = {key[1]: sorted(v * 1000 for v in values) for key, values in results.items()
                if isinstance(key, tuple) and key[0] == screen and not key[1].endswith("*")}
        if not rows:
            print(f"  {screen:8s} (no keys timed)")
            continue
        slowest = max(rows, key=lambda name: statistics.median(rows[name]))
        median = statistics.median(rows[slowest])
        print(f"  {screen:8s} slowest median {median:6.1f} ms ({slowest}) "
              f"{'ok' if median < 50 else 'OVER'}; " + ", ".join(
                  f"{name} {statistics.median(ms):.1f}/{ms[int(0.95 * (len(ms) - 1))]:.1f}"
                  for name, ms in rows.items()))


if __name__ == "__main__":
    main()
