"""Snapshot open benchmark on the user's path (issues 25 and 34): ``memtui summary`` on a
PyTorch snapshot against ``pickle.load`` of the same file, whole processes, paired in one run.

For each size it writes (or reuses, with ``--keep``) a synthetic snapshot with
``benchmarks/generate.py``, and takes each ``--file`` as it is (a real capture, such as the
5M-event H100 loop of tests/data/cuda_recipes/long_loop.py); then ``--repeat`` rounds of, in
turn (a shared machine's drift hits them alike), each a fresh process:

* ``pickle.load``: the bare read of the file, collector on (the baseline);
* ``first``: ``memtui summary`` with an empty reopen cache: what a user's first open costs,
  the cache entry, its levels and the summary's figures written (the headline row);
* ``reopen``: ``memtui summary`` again, from that cache;
* ``no-cache``: ``memtui summary --no-cache`` (the second row: the same work, nothing
  written);
* ``Python``: the same with ``MEMTUI_PURE_PYTHON=1`` (``--no-python`` skips it: at 20M
  events it needs about as much memory as ``pickle.load``);
* ``paint``: the TUI's first full paint without the cache (bench_ui.py's measure).

It prints medians of wall and CPU seconds, the ratios to ``pickle.load`` (goals: first
<= 0.5x, reopen <= 0.1x of the first), peak RSS as a multiple of the file's size (goal:
first <= 3x) and in GB (goal: 20M events in <= 8 GB), and seconds per million events
(linear growth: about constant across sizes).  CPU ratios are printed too: on a machine
shared with other work they are the steadier figure.

    python benchmarks/bench_reader.py --events 1000000 5000000 --repeat 3 --keep /tmp/snaps \
        --file /data/long_loop_5m.pickle
    python benchmarks/bench_reader.py --events 20000000 --repeat 1 --no-python --no-paint \
        --keep /tmp/snaps --keys 10
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

from benchmarks.bench_open import _BARE, first_paint  # noqa: E402
from benchmarks.processes import run_process  # noqa: E402


def _snapshot(n_events: int, folder: Path) -> Path:
    """The generated snapshot of ``n_events`` (written in a process of its own: this one
    stays small, see benchmarks/processes.py)."""
    path = folder / f"bench_{n_events}.pickle"
    if not path.exists():  # written whole or not at all
        partial = folder / f"bench_{n_events}.pickle.partial"
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "generate.py"), "--events",
                        str(n_events), "--out", str(partial)], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
        partial.rename(path)
    return path


#: The rows, in the order each round runs them and the table prints them.
ROWS = ("bare", "first", "reopen", "summary", "python", "paint")
LABELS = {"first": "first", "reopen": "reopen", "summary": "no-cache", "python": "Python",
          "paint": "paint"}


def _commands(path: Path, cache_home: str, python: bool) -> dict:
    """Each row's command line and environment; ``first`` and ``reopen`` share
    ``cache_home`` (empty at the start of the round)."""
    env = {**os.environ, "XDG_CACHE_HOME": cache_home, "PYTHONPATH": str(REPO),
           "MEMTUI_PURE_PYTHON": "0"}
    env.pop("MEMTUI_NO_CACHE", None)
    summary = [sys.executable, "-m", "memtui.cli", "summary"]
    commands = {"bare": ([sys.executable, "-c", _BARE, str(path)], None),
                "first": ([*summary, str(path)], env),
                "reopen": ([*summary, str(path)], env),
                "summary": ([*summary, "--no-cache", str(path)], env)}
    if python:
        commands["python"] = ([*summary, "--no-cache", str(path)],
                              {**env, "MEMTUI_PURE_PYTHON": "1"})
    return commands


def bench(path: Path, repeat: int, python: bool, paint: bool) -> dict:
    """Medians of ``repeat`` rounds of every row on ``path``."""
    runs: dict[str, list[dict]] = {}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cache_home:  # empty for this round's first
            for what, (argv, env) in _commands(path, cache_home, python).items():
                runs.setdefault(what, []).append(run_process(argv, env))
        if paint:  # the compiled reader (process_paint takes this process's env)
            os.environ["MEMTUI_PURE_PYTHON"] = "0"
            runs.setdefault("paint", []).append(first_paint(path))
    m = {what: {k: statistics.median(r[k] for r in done) for k in done[0]}
         for what, done in runs.items()}
    return {"path": path, "events": _events_of(path), "bytes": path.stat().st_size, "m": m}


def _events_of(path: Path) -> int:
    """The trace entries of a snapshot (the generated ones say it in their name; a real
    one is counted in a process of its own)."""
    stem = path.stem.removeprefix("bench_")
    if stem.isdigit():
        return int(stem)
    count = "import sys\nfrom memtui.loading import load_trace\n" \
            "print(load_trace(sys.argv[1], use_cache=False).events.height)\n"
    done = subprocess.run([sys.executable, "-c", count, str(path)], cwd=REPO, check=True,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    return int(done.stdout.split()[-1])


def _fmt(figures: dict | None, bare: dict, size: int) -> str:
    if figures is None:
        return "(skipped)"
    wall, cpu = figures["wall"], figures["cpu"]
    text = (f"{wall:>6.2f} [{cpu:>6.2f}] {wall / bare['wall']:>5.2f}x"
            f" [{cpu / bare['cpu']:>5.2f}x]")
    if "rss" in figures:
        text += f" {figures['rss'] / size:>4.1f}xF {figures['rss'] / 1e9:>5.2f} GB"
    return text


def print_row(r: dict) -> None:
    m, size = r["m"], r["bytes"]
    bare = m["bare"]
    name = r["path"].name if not r["path"].stem.startswith("bench_") else "generated"
    print(f"{r['events']:>10,} events, {size / 1e6:,.0f} MB ({name})", flush=True)
    print(f"  {'pickle.load':<12} {bare['wall']:>6.2f} [{bare['cpu']:>6.2f}] "
          f"{bare['rss'] / size:>18.1f}xF {bare['rss'] / 1e9:>5.2f} GB")
    for what in ROWS[1:]:
        if what in m or what in ("python", "paint"):
            print(f"  {LABELS[what]:<12} {_fmt(m.get(what), bare, size)}")
    first, reopen = m["first"], m["reopen"]
    print(f"  reopen {reopen['wall'] / first['wall']:.3f}x the first open; first open "
          f"{first['wall'] / (r['events'] / 1e6):.2f} s per million events "
          f"[{first['cpu'] / (r['events'] / 1e6):.2f} CPU]; first open "
          f"{_verdict(first['wall'] <= 0.5 * bare['wall'])} 0.5x pickle.load, "
          f"{_verdict(first['rss'] <= 3 * size)} 3x the file"
          + (f", {_verdict(first['rss'] <= 8e9)} 8 GB" if r["events"] >= 20_000_000 else ""),
          flush=True)


def _verdict(ok: bool) -> str:
    return "within" if ok else "OVER"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 2_000_000])
    parser.add_argument("--file", type=Path, nargs="*", default=[],
                        help="real snapshots to measure beside the generated ones")
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
    if not args.no_paint:
        first_paint(REPO / "snapshots" / "demo_oom.pickle")
    print("Snapshots on the user's path: medians of paired runs, whole processes: wall s "
          "[CPU s], ratio to pickle.load [CPU ratio], peak RSS as a multiple of the file "
          "(xF) and in GB")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        inputs = [_snapshot(n, folder) for n in args.events] + list(args.file)
        for path in inputs:
            print_row(bench(path, args.repeat, not args.no_python, not args.no_paint))
        for path in inputs if args.keys else ():
            print_keys(_events_of(path), path, args.keys)
    print("goals: first open <= 0.50x pickle.load and <= 3x the file; 20M events <= 8 GB; "
          "reopen <= 0.1x the first; s per million events about constant (linear); Blocks, "
          "Pool and Stacks keys < 50 ms median")


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
