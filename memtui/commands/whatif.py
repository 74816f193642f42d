"""``memtui whatif PATH [--set KEY:VALUE ...] [--capacity SIZE | --fraction-limit SIZE]
[--device D] [--json]``:
replay a PyTorch snapshot through the caching allocator, prove the replay on the recorded
addresses, then predict what a setting changes (memtui.analysis.replay)."""

from __future__ import annotations

import argparse
import json

HELP = "replay the caching allocator: prove it on the recording, predict a setting's effect"
#: Only prints: the process may end without tearing the interpreter down (cli.entry).
QUICK_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="PyTorch snapshot (default: the demo)")
    parser.add_argument("--set", metavar="KEY:VALUE", action="append", default=[],
                        dest="changes",
                        help="an allocator setting as in PYTORCH_CUDA_ALLOC_CONF "
                             "(expandable_segments:True, max_split_size_mb:512, "
                             "roundup_power2_divisions:4, garbage_collection_threshold:0.8); "
                             "repeat for several")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--capacity", metavar="SIZE",
                       help="the device memory the allocator may reach (80GiB, 24GB): "
                            "would it fit on a smaller card")
    limit.add_argument("--fraction-limit", metavar="SIZE",
                       help="a per-process limit (torch.cuda.set_per_process_memory_"
                            "fraction) of SIZE: garbage_collection_threshold acts only "
                            "under one")
    parser.add_argument("--device", metavar="D", help="one device (default: every device)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from memtui.api import open as open_capture
    from memtui.commands.paths import capture_path

    path = capture_path(args.path)
    result = open_capture(path).whatif(args.changes, capacity=args.capacity,
                                       fraction_limit=args.fraction_limit, device=args.device)
    print(json.dumps(result.to_dict()) if args.json else result.text(), flush=True)
    if result.refusal:  # no device answered: after the report, the refusal's line, exit 2
        from memtui.errors import CaptureError

        raise CaptureError(path, result.refusal)
    return 0

