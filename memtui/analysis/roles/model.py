"""The roles, the rules that give them, and the per-block result every consumer reads.

A role says what kind of memory a block is (DESIGN.md section 3, "Roles"):

=================== ==================================================================
``parameter``       a model's weights and buffers
``gradient``        the ``.grad`` of a parameter
``optimizer_state`` what an optimizer keeps per parameter from step to step (Adam's
                    ``exp_avg``/``exp_avg_sq``, momentum)
``activation``      kept from a forward pass for its backward
``temporary``       freed within the phase that made it
``input``           batches and their copies to the device
``cache``           kept from one forward pass into the next (a KV cache, a library's
                    workspace)
``other``           what no rule explains, said as such
=================== ==================================================================

Every rule has a short id (the ``rule`` column of :class:`BlockRoles`), and :data:`RULES`
says, for each, the role it gives and the evidence it reads: the table the UI's help, the
docs and ``--json`` quote.  The modules that apply them (:mod:`.stack_rules`,
:mod:`.phases`, :mod:`.lifetimes`, :mod:`.owners`, :mod:`.user_rules`) document each
rule beside its code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

ROLES = ("parameter", "gradient", "optimizer_state", "activation", "temporary", "input",
         "cache", "other")
ROLE_DTYPE = pl.Enum(ROLES)
#: How a person reads each role (text, legends).
ROLE_LABELS = {"parameter": "parameters", "gradient": "gradients",
               "optimizer_state": "optimizer state", "activation": "activations",
               "temporary": "temporaries", "input": "inputs", "cache": "caches",
               "other": "other"}
#: Short legend names for an 80-column pane.
ROLE_SHORT = {"parameter": "param", "gradient": "grad", "optimizer_state": "optim",
              "activation": "activ", "temporary": "temp", "input": "input",
              "cache": "cache", "other": "other"}
OTHER = ROLES.index("other")


@dataclass(frozen=True)
class Rule:
    """One rule: the role it gives and the evidence it reads."""

    role: str
    evidence: str


#: Every rule by id (see the module docstring).  The ids are stable: ``--json`` and the
#: user's filters name them.
RULES: dict[str, Rule] = {
    "user": Rule("(the user's)", "a regular expression of [tool.memtui.roles] or --roles "
                 "matched a frame of the block's stack, its owner or its metadata"),
    "metadata": Rule("(named)", "the block's user_metadata (torch.cuda.memory."
                     "_set_memory_metadata) names a role"),
    "owner_tag": Rule("(named)", "msMemScope's owner tag names the role (PTA@weight, "
                      "PTA@gradient, PTA@optimizer_state, kv_cache, fsdp activation, ...)"),
    "accumulate_grad": Rule("gradient", "made by autograd's AccumulateGrad (C++ frames)"),
    "zero_grad": Rule("gradient", "freed by zero_grad (the free's stack): a .grad set to None"),
    "backward_kept": Rule("gradient", "made in a backward pass and still alive when it ended "
                          "(what backward leaves behind is the .grad of the leaves)"),
    "module_kept": Rule("parameter", "made by module construction or loading (Module._apply, "
                        ".to()/.cuda(), torch.nn.init, load_state_dict, from_pretrained) and "
                        "kept across steps"),
    "optimizer_kept": Rule("optimizer_state", "made by an optimizer (torch.optim, an "
                           "optimizer library, a step() method) and kept across steps"),
    "paired_parameter": Rule("parameter", "kept across steps, not made by a forward or "
                             "backward pass, and one per gradient of its size: inferred "
                             "by pairing with the gradients"),
    "paired_state": Rule("optimizer_state", "kept across steps, not made by a forward or "
                         "backward pass, its size that of a parameter, beyond the "
                         "parameters of that size (1 to 3 per parameter): inferred by "
                         "pairing"),
    "init_kept": Rule("parameter", "made in the user's own __init__ and kept across steps, "
                      "paired with no gradient: taken for a module's parameters "
                      "(inferred)"),
    "paired_gradient": Rule("gradient", "kept across steps, not made in the capture's "
                            "backward passes, and beyond the parameters of its size that "
                            "the optimizer's state counts: a .grad kept between steps "
                            "(inferred by pairing)"),
    "ghost_forward_only": Rule("parameter", "alive before the capture and through a capture "
                               "with no backward and no optimizer (inference, a forward "
                               "profiled alone): the weights it reads (inferred)"),
    "forward_at_end": Rule("activation", "made in the capture's last forward pass and still "
                           "alive at its end, in a training capture or one forward profiled "
                           "alone: saved for a backward the capture does not reach "
                           "(inferred)"),
    "like_its_line": Rule("(its line's)", "never freed, made by the user's code before the "
                          "capture's last training forward: the role most other blocks of "
                          "its allocation stack have (the loop's last batch an input); an "
                          "input where its line has no other (inferred)"),
    "saved_for_backward": Rule("activation", "made in a forward pass that a backward pass "
                               "follows, alive into that backward, freed before the next "
                               "forward"),
    "ghost_freed_in_backward": Rule("activation", "alive before the capture and freed in a "
                                    "backward pass: inferred"),
    "kept_forward": Rule("cache", "made in a forward pass and kept into the next forward "
                         "(a KV cache, a library's workspace such as cuBLAS's)"),
    "kept_backward": Rule("cache", "made in a backward pass and kept from step to step, "
                          "the size of no parameter or gradient (a library's workspace, "
                          "such as cuBLAS's for the backward's stream)"),
    "data_loading": Rule("input", "made by data loading (torch.utils.data, collate, "
                         "pin_memory)"),
    "fed_forward": Rule("input", "made outside any module before a forward pass, alive "
                        "into it and freed before the next (a batch, its copy to the "
                        "device)"),
    "phase_temporary": Rule("temporary", "freed within the phase that made it (forward, "
                            "backward, or between them)"),
    "operator_temporary": Rule("temporary", "an operator's output freed before a backward "
                               "operator ran"),
    "operator_activation": Rule("activation", "a forward operator's output alive into the "
                                "backward operators"),
    "operator_gradient": Rule("gradient", "made by a backward operator and alive when the "
                              "backward operators ended"),
    "workspace": Rule("temporary", "an operator workspace (PTA_WORKSPACE, the profiler's "
                      "WORKSPACE component)"),
    "kept_unpaired": Rule("other", "kept across steps, not paired with any parameter"),
    "ghost_unpaired": Rule("other", "alive before the capture; nothing in the trace pairs "
                           "it with a role"),
    "no_phases": Rule("other", "the capture shows no forward or backward pass (no call "
                      "stacks naming them): its blocks are not told apart"),
    "left_over": Rule("other", "no rule explains it"),
    "before_profile": Rule("other", "the level no operator row explains (memory_record "
                           "outside any operator: parameters and optimizer state alive "
                           "before the profile, not told apart)"),
}


@dataclass
class BlockRoles:
    """The role of every block of one device.

    ``frame`` has one row per block of the device, in its order: ``block_id``, ``role``
    (:data:`ROLE_DTYPE`), ``rule`` (an id of :data:`RULES`) and ``inferred`` (True where
    the role was inferred by pairing, not read from the block's own evidence).
    ``codes`` is the role of each row as its index in :data:`ROLES` (for bincounts);
    ``phases`` says what the phases were found from (for the text), or None where none;
    ``found`` are those phases and ``optimizer_at`` where the optimizer allocated (the
    savings findings read them).
    """

    device: str
    frame: pl.DataFrame
    phases: str | None = None
    #: The phases found (:class:`~memtui.analysis.roles.phases.Phases`), None where none.
    found: object | None = None
    #: Event positions of the allocations an optimizer made (its steps).
    optimizer_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def codes(self) -> np.ndarray:
        return self.frame["role"].to_physical().to_numpy().astype(np.int64, copy=False)

    def role_of(self, block_id: int) -> str | None:
        row = self.frame.filter(pl.col("block_id") == block_id)
        return None if row.is_empty() else str(row["role"][0])


def empty_roles(device: str) -> BlockRoles:
    return BlockRoles(device, pl.DataFrame(schema={
        "block_id": pl.Int64, "role": ROLE_DTYPE, "rule": RULE_DTYPE, "inferred": pl.Boolean}))


RULE_IDS = tuple(RULES)
RULE_DTYPE = pl.Enum(RULE_IDS)


def rule_code(rule: str) -> int:
    return RULE_IDS.index(rule)


def role_frame(block_id: np.ndarray, codes: np.ndarray, rules: np.ndarray,
               inferred: np.ndarray) -> pl.DataFrame:
    """The ``frame`` of :class:`BlockRoles` from arrays: ``codes`` index :data:`ROLES`,
    ``rules`` index :data:`RULE_IDS`."""
    return pl.DataFrame({
        "block_id": np.asarray(block_id, dtype=np.int64),
        "role": _enum(codes, ROLES, ROLE_DTYPE),
        "rule": _enum(rules, RULE_IDS, RULE_DTYPE),
        "inferred": np.asarray(inferred, dtype=bool),
    })


def _enum(codes: np.ndarray, names: tuple[str, ...], dtype: pl.Enum) -> pl.Series:
    """An Enum column from codes (a gather of the names: no Python object per row)."""
    index = pl.Series(np.asarray(codes, dtype=np.uint32))
    return pl.Series(list(names), dtype=dtype).gather(index)


def role_code(role: str) -> int:
    return ROLES.index(role)


__all__ = ["OTHER", "ROLES", "ROLE_DTYPE", "ROLE_LABELS", "ROLE_SHORT", "RULES", "RULE_DTYPE",
           "RULE_IDS", "BlockRoles", "Rule", "empty_roles", "role_code", "role_frame",
           "rule_code"]
