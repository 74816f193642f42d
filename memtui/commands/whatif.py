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
    from dataclasses import replace

    from memtui.analysis.replay.predict import predict
    from memtui.analysis.replay.proof import prove
    from memtui.analysis.replay.settings import (
        SettingError,
        apply_changes,
        from_capture,
        parse_size,
    )
    from memtui.commands.paths import capture_path
    from memtui.errors import CaptureError
    from memtui.loading import load_trace
    from memtui.text.replay import format_prediction, format_proof

    path = capture_path(args.path)
    trace = load_trace(path)
    devices = trace.meta.device_names
    if args.device is not None:
        if args.device not in devices:
            raise CaptureError(path, f"no device {args.device!r} (it has {', '.join(devices)})")
        devices = [args.device]
    recorded = from_capture(trace.meta.extra.get("allocator_settings"))
    try:
        changed = apply_changes(recorded, args.changes)
        if args.capacity is not None:
            changed = replace(changed, capacity=parse_size(args.capacity, "--capacity"))
        if args.fraction_limit is not None:
            changed = replace(changed, capacity=parse_size(args.fraction_limit,
                                                           "--fraction-limit"),
                              memory_fraction=True)
    except SettingError as err:
        raise CaptureError(path, str(err)) from None
    predicting = bool(args.changes) or changed.capacity is not None
    out = []
    for device in devices:
        proof, baseline = prove(trace, device)
        prediction = predict(trace, device, changed, (proof, baseline)) if predicting else None
        out.append((proof, prediction))
    if args.json:
        print(json.dumps({"path": str(path), "devices": [
            {"proof": proof.to_dict(),
             "prediction": prediction.to_dict() if prediction else None}
            for proof, prediction in out]}), flush=True)
    else:
        blocks = []
        for proof, prediction in out:
            blocks.append(format_proof(proof))
            if prediction is not None:
                blocks.append(format_prediction(prediction))
        print("\n\n".join(blocks), flush=True)
    refusal = _refusal(out)
    if refusal:  # no device answered: after the report, the refusal's one line, exit 2
        raise CaptureError(path, refusal)
    return 0


def _refusal(out: list) -> str:
    """Why no device answered (no replay could be made, or every prediction asked for was
    refused: an unproven replay makes none), or "" where one did (the proof of a replay
    that does not hold is an answer where no prediction was asked for)."""
    reasons = []
    for proof, prediction in out:
        if proof.refused:
            reasons.append(f"{proof.device}: no replay ({proof.refused})")
        elif prediction is not None and prediction.refused:
            reasons.append(f"{proof.device}: prediction refused ({prediction.refused})")
        else:
            return ""
    if not reasons:
        return "no device to replay"
    more = f" (and {len(reasons) - 1} more devices)" if len(reasons) > 1 else ""
    return f"no what-if answer: {reasons[0]}{more}"
