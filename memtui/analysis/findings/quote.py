"""The what-if hook of the findings: an OOM or fragmentation finding (not ``info``) whose
advice names an allocator setting quotes what a proven replay predicts that setting does
on this capture (the reserved peak before and after, the OOM avoided or not), instead of
the general hint, and fills ``predicted_saving_bytes`` (the reserved peak's saving).

Only where the replay is proven on that device (:mod:`.proof`), and only on devices of at
most :data:`QUOTE_MAX_EVENTS` events: a replay is one Python step per event, and the
findings must stay a fraction of the open time (``memtui whatif`` has no such limit).
The general advice is kept beside the quote (``detail["general_advice"]``); a device whose
proof fails says why in ``detail["replay"]``.  A fragmentation finding that gives no advice
of its own gets the prediction for ``expandable_segments:True`` (where it is off) as its
advice; a fragmentation finding's title and severity follow the prediction
(:func:`memtui.analysis.findings.fragmentation.with_prediction`: it recommends the setting
only where the replay says it saves at least 5% of the reserved peak or avoids the OOM
the finding explains), so no title recommends what the proven replay says would not
help.
"""

from __future__ import annotations

import re
from dataclasses import replace

from memtui.analysis.findings.fragmentation import SETTING, with_prediction
from memtui.analysis.findings.model import Finding
from memtui.analysis.replay.predict import Prediction, predict
from memtui.analysis.replay.proof import can_replay, prove
from memtui.analysis.replay.settings import (
    SettingError,
    Settings,
    apply_changes,
    from_capture,
)
from memtui.model import MemoryTrace
from memtui.units import format_bytes as fb

#: Devices with more events than this get no quote inside the findings.
QUOTE_MAX_EVENTS = 300_000
_SETTING = re.compile(r"(expandable_segments:True|max_split_size_mb:\d+|"
                      r"garbage_collection_threshold:[0-9.]+|roundup_power2_divisions:\d+)")


_ENV = re.compile(r"set (\w+_ALLOC_CONF)=")


def recommended_setting(finding: Finding) -> str | None:
    """The first allocator setting the finding's advice names (``KEY:VALUE``)."""
    match = _SETTING.search(str(finding.detail.get("advice") or ""))
    return match.group(1) if match else None


def setting_for(finding: Finding, recorded: Settings) -> str | None:
    """The setting to predict for ``finding``: the one its advice names; for a
    fragmentation finding without advice, expandable segments where they are off (the
    remedy PyTorch's own OOM message names)."""
    named = recommended_setting(finding)
    if named is None and finding.kind == "fragmentation" and not finding.detail.get("advice") \
            and not recorded.expandable_segments:
        return "expandable_segments:True"
    return named


def quote_predictions(trace: MemoryTrace,
                      findings: dict[str, list[Finding]]) -> dict[str, list[Finding]]:
    """``findings`` with each OOM / fragmentation finding's advice replaced by the proven
    replay's prediction of the setting it recommends (see the module docstring)."""
    out = {}
    recorded = from_capture(trace.meta.extra.get("allocator_settings"))
    for device, found in findings.items():
        # (an info fragmentation finding is replayed where its advice names the setting:
        # fragmented bytes worth trying it on; the replay may raise it to medium)
        wanted = [f for f in found if f.kind in ("oom", "fragmentation")
                  and (f.severity != "info" or (f.kind == "fragmentation"
                                                 and recommended_setting(f)))
                  and setting_for(f, recorded)]
        if not wanted or not _replayable(trace, device):
            out[device] = found
            continue
        proof_and_run = prove(trace, device)
        cache: dict[str, Prediction] = {}
        out[device] = [_quoted(trace, device, f, proof_and_run, cache) if f in wanted else f
                       for f in found]
    return out


def _replayable(trace: MemoryTrace, device: str) -> bool:
    return (trace.meta.source == "torch_snapshot" and not can_replay(trace, device)
            and trace.device_events(device).height <= QUOTE_MAX_EVENTS)


def _quoted(trace: MemoryTrace, device: str, finding: Finding, proof_and_run,
            cache: dict[str, Prediction]) -> Finding:
    setting = setting_for(finding, from_capture(trace.meta.extra.get("allocator_settings")))
    assert setting is not None
    proof = proof_and_run[0]
    if not proof.holds:
        return replace(finding, detail={**finding.detail,
                                        "replay": f"not proven: {proof.why_not()}"})
    if setting not in cache:
        try:
            settings = apply_changes(from_capture(trace.meta.extra.get("allocator_settings")),
                                     [setting])
        except SettingError:
            return finding
        cache[setting] = predict(trace, device, settings, proof_and_run)
    quote = predicted_saving_text(cache[setting])
    if quote is None:
        return finding
    prediction = cache[setting]
    env = _ENV.search(str(finding.detail.get("advice") or ""))
    env_name = env.group(1) if env else "PYTORCH_CUDA_ALLOC_CONF"
    avoided = any(c.change == "avoided" for c in prediction.oom_changes)
    helps = (prediction.saving or 0) > 0 or avoided
    advice = (f"set {env_name}={setting}: {quote}" if helps
              else f"{setting} would not help here: {quote}")
    if finding.kind == "fragmentation" and setting == SETTING and prediction.recorded \
            and prediction.predicted:
        finding = with_prediction(finding, prediction.recorded.reserved_peak,
                                  prediction.predicted.reserved_peak, env_name, avoided)
    return replace(finding, detail={
        **finding.detail,
        "advice": advice,
        **({"general_advice": finding.detail["advice"]} if finding.detail.get("advice")
           else {}),
        "predicted_reserved_peak_bytes": prediction.predicted.reserved_peak
        if prediction.predicted else None,
        "predicted_saving_bytes": prediction.saving,
    })


def predicted_saving_text(prediction: Prediction) -> str | None:
    """The proven replay's predicted effect, for a finding (the setting is said before)."""
    p = prediction
    if p.refused or p.recorded is None or p.predicted is None:
        return None
    r, n = p.recorded, p.predicted
    text = (f"a replay of this capture, proven on it ({p.proof.address_share:.0%} of allocs "
            f"at their recorded address), predicts the reserved peak goes from "
            f"{fb(r.reserved_peak)} to {fb(n.reserved_peak)}")
    avoided = sum(1 for c in p.oom_changes if c.change == "avoided")
    still = sum(1 for c in p.oom_changes if c.change == "still happens")
    caused = sum(1 for c in p.oom_changes if c.change == "caused")
    if avoided:
        verb = "is" if avoided == 1 else "are"
        text += f" and {avoided} of the {avoided + still} recorded OOMs {verb} avoided"
    elif still:
        text += ", but the recorded OOM still happens"
    if caused:
        text += f"; it would cause {caused} OOM{'s' if caused > 1 else ''}"
    return text
