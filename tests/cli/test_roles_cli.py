"""Memory by role on the command line (issue 32): ``by_role`` in summary, state, findings,
check and compare JSON summing to the level, ``--max-role``, ``--roles FILE`` and
``[tool.memtui.roles]`` (bad ones: one line, exit 2), and the savings findings made where
their role is and never where it is absent."""

from __future__ import annotations

import json

import pytest

from memtui.analysis.roles.model import ROLE_LABELS
from memtui.cli import main
from memtui.units import signed_bytes
from tests.conftest import REPO
from tests.helpers.training_snapshots import Loop, training_snapshot

DATA = REPO / "tests" / "data"
ADAMW = DATA / "cuda_roles_adamw.pickle"
HANDOPT = DATA / "cuda_roles_handopt.pickle"


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys, *args) -> dict:
    code, out, _ = run(capsys, *args, "--json")
    assert code in (0, 1)
    return json.loads(out)


def test_summary_state_findings_sum_to_the_level(capsys):
    summary = as_json(capsys, "summary", ADAMW)
    (device,) = summary["devices"]
    assert sum(device["by_role"].values()) == device["peak_allocated_bytes"]
    assert device["by_role"]["optimizer_state"] == 134283264  # AdamW: 2 x 67,141,632
    assert device["roles"]["phases_from"] == "call stacks"
    assert sum(device["roles"]["at_end"].values()) == device["allocated_at_end_bytes"]
    for event in ("first", "peak", "last", "300"):
        state = as_json(capsys, "state", ADAMW, "--event", event)
        assert sum(state["by_role"].values()) == state["level"]["allocated"]
        roles = {b["role"] for s in state["segments"] for b in s["blocks"]
                 if b["state"] != "free"}
        assert None not in roles
    findings = as_json(capsys, "findings", ADAMW)
    (entry,) = findings["devices"]
    assert sum(entry["by_role"].values()) == device["peak_allocated_bytes"]
    code, out, _ = run(capsys, "summary", ADAMW)
    assert "by role at the peak: parameters 64.0 MiB" in out


def test_savings_where_their_role_is(capsys):
    """AdamW's state at the peak: sharding saves (N-1)/N of it; the hand-written Adam keeps
    its gradients: the finding says how many bytes; each names its role figure."""
    found = as_json(capsys, "findings", ADAMW)["devices"][0]["findings"]
    savings = {f["detail"]["role"]: f for f in found if f["kind"] == "savings"}
    sharding = savings["optimizer_state"]
    assert sharding["detail"]["role_bytes"] == 134283264
    assert sharding["detail"]["saving_over_ranks"] == {"2": 67141632, "4": 100712448,
                                                       "8": 117497856}
    assert sharding["severity"] == "medium" and "shard" in sharding["detail"]["advice"]
    assert "activation" not in savings  # none alive at AdamW's peak (its optimizer step)
    kept = [f for f in as_json(capsys, "findings", HANDOPT)["devices"][0]["findings"]
            if f["kind"] == "savings" and f["detail"]["role"] == "gradient"
            and "gradient_bytes_into_forward" in f["detail"]]
    assert kept and kept[0]["detail"]["gradient_bytes_into_forward"] == 67141632
    assert not [f for f in found if f["kind"] == "savings"
                and "gradient_bytes_into_forward" in f["detail"]]  # set_to_none=True


def test_no_saving_without_its_role(tmp_path, capsys):
    """A loop with no optimizer state (SGD without momentum) and checkpointed layers: no
    sharding finding, every finding's role present at the peak."""
    snap = training_snapshot(Loop(states=0, checkpointing=True), tmp_path / "sgd.pickle")
    result = as_json(capsys, "findings", snap.path)["devices"][0]
    for finding in result["findings"]:
        if finding["kind"] == "savings":
            assert result["by_role"][finding["detail"]["role"]] > 0
            assert finding["detail"]["role"] != "optimizer_state"


def test_max_role(capsys, tmp_path, monkeypatch):
    code, out, _ = run(capsys, "check", ADAMW, "--max-role", "optimizer_state=100MiB")
    assert code == 1 and "optimizer state peak 128.1 MiB > --max-role" in out
    code, out, _ = run(capsys, "check", ADAMW, "--max-role", "optimizer_state=200MiB",
                       "--max-role", "activation=1GiB")
    assert code == 0
    verdict = as_json(capsys, "check", ADAMW, "--max-role", "optimizer_state=200MiB")
    assert verdict["limits"]["max_role"] == {"optimizer_state": 200 << 20}
    assert sum(verdict["by_role"]["cuda:0"].values()) == 403865600
    code, _, err = run(capsys, "check", ADAMW, "--max-role", "weights=1GiB")
    assert code == 2 and "'weights' is not a role" in err and err.count("\n") == 1
    (tmp_path / "pyproject.toml").write_text(
        '[tool.memtui.check]\nmax-role = { optimizer_state = "100 MiB" }\n')
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "check", ADAMW)
    assert code == 1 and "max_role:optimizer_state" in out


def test_role_rules_from_a_file_and_pyproject(capsys, tmp_path, monkeypatch):
    rules = tmp_path / "roles.toml"
    rules.write_text('[tool.memtui.roles]\ncache = "get_batch"\n')
    state = as_json(capsys, "state", HANDOPT, "--event", "peak", "--roles", rules)
    assert state["by_role"]["input"] == 0 and state["by_role"]["cache"] == 76546048
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.memtui.roles]\ninput = "forward_backward"\n')
    state = as_json(capsys, "state", HANDOPT, "--event", "peak")
    assert state["by_role"]["activation"] == 0  # the user's rule named them inputs first
    (tmp_path / "pyproject.toml").write_text("this is [not toml\n")  # someone else's
    state = as_json(capsys, "state", HANDOPT, "--event", "peak")
    assert state["by_role"]["input"] == 8388608


@pytest.mark.parametrize(("text", "says"), [
    ('[tool.memtui.roles]\ncache = "("\n', "is not a regular expression"),
    ('[tool.memtui.roles]\nkv = "x"\n', "'kv' is not a role"),
    ('[tool.memtui.roles]\ncache = 3\n', "must be a regular expression or a list"),
    ("[tool.memtui]\nroles = 3\n", "[tool.memtui.roles] must be a table"),
    ("not toml [", "not valid TOML"),
])
def test_bad_role_rules_are_one_line(capsys, tmp_path, text, says):
    rules = tmp_path / "roles.toml"
    rules.write_text(text)
    code, out, err = run(capsys, "summary", ADAMW, "--roles", rules)
    assert code == 2 and says in err and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"memtui: {rules}")


def test_compare_by_role(capsys):
    result = as_json(capsys, "compare", ADAMW, HANDOPT)
    (pair,) = result["devices"]
    moved = {(r["role"], r["at"]): r["delta"] for r in pair["by_role"]}
    assert moved[("activation", "peak")] == 25165828  # the hand loop's peak is a backward
    assert moved[("optimizer_state", "peak")] == 0
    code, out, _ = run(capsys, "compare", ADAMW, HANDOPT)
    assert "activations" in out
    # the one line that says it ("optimizer state +3.2 GiB"): the peak's changes, largest
    # first, from the JSON's rows
    peak = sorted(((r["role"], r["delta"]) for r in pair["by_role"]
                   if r["at"] == "peak" and r["delta"]), key=lambda rd: -abs(rd[1]))
    said = ", ".join(f"{ROLE_LABELS[role]} {signed_bytes(delta)}" for role, delta in peak)
    assert peak and f"  by role at the peak: {said}\n" in out
    assert f"{ROLE_LABELS['activation']} +24.0 MiB" in said  # 25,165,828 bytes


def test_the_api(tmp_path):
    import memtui

    cap = memtui.open(HANDOPT, roles={"cache": "get_batch"})
    assert cap.by_role("peak")["input"] == 0
    frame = cap.roles()
    assert set(frame.columns) >= {"block_id", "role", "rule", "inferred"}
    assert frame.filter(frame["rule"] == "user").height > 0
    state = cap.state("peak")
    assert sum(state.by_role.values()) == state.level["allocated"]
    device = cap.summary().devices[0]
    assert sum(device.by_role.values()) == device.peak_allocated_bytes
    with pytest.raises(memtui.CaptureError, match="not a role"):
        memtui.open(HANDOPT, roles={"weights": "x"})



def test_the_summary_says_how_many_roles_were_inferred(capsys):
    """History started after two steps: every parameter and optimizer-state tensor (the
    recipe's truth: 8 and 16 storages) is alive before it, with no stack; their roles are
    inferred by pairing, and the text says how many; a capture with nothing inferred says
    nothing of it."""
    late = DATA / "cuda_roles_late.pickle"
    truth = json.loads(late.with_suffix(".truth.json").read_text())
    ghosts = len(truth["parameter"]) + len(truth["optimizer_state"])
    (device,) = as_json(capsys, "summary", late)["devices"]
    assert device["roles"]["inferred_blocks"] == ghosts == 24
    _, out, _ = run(capsys, "summary", late)
    assert f"; {ghosts} blocks named by inference (paired by size and lifetime" in out
    _, out, _ = run(capsys, "summary", ADAMW)
    assert "by role at the peak:" in out and "named by inference" not in out
