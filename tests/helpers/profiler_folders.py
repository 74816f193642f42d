"""Profiler folders for the attribution tests: one written by hand, one of real files.

The hand folder (``hand_profiler_folder``), times in µs from 1000, sizes in MiB:

=====  ========  =====================================  ===============================
event  level     blocks alive (operators)               unexplained: before / no op
=====  ========  =====================================  ===============================
0      110       aten::a 10                             100 / 0   (100 alive before)
1      130       aten::a 10, aten::b 20                 100 / 0
2      135       aten::a 10, aten::b 20                 100 / 5   (the peak)
3      125       aten::b 20 (a freed)                   100 / 5
4      110       aten::b 20                             90 / 0    (15 of before freed)
5      15        aten::b 20                             0 / -5    (blocks ahead)
=====  ========  =====================================  ===============================
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SHARED_DATA

TAB = "\t"
RECORD_HEADER = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),"
                 "Total Active(MB),Stream Ptr,Device Type")
OPERATOR_HEADER = (
    "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),"
    "Active Duration(us),Allocation Total Allocated(MB),Allocation Total Reserved(MB),"
    "Allocation Total Active(MB),Release Total Allocated(MB),Release Total Reserved(MB),"
    "Release Total Active(MB),Stream Ptr,Device Type")
LEVELS_MIB = [110, 130, 135, 125, 110, 15]
PEAK_EVENT = 2


def hand_profiler_folder(parent: Path) -> Path:
    """The folder of the table above (``rank0/npu0``)."""
    out = parent / "hand_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    rows = [f"PTA+GE,{1000 + i}.000{TAB},{mib}.0,200.0,{mib}.0,7,NPU:0"
            for i, mib in enumerate(LEVELS_MIB)]
    (out / "memory_record.csv").write_text("\n".join([RECORD_HEADER, *rows]) + "\n")
    ops = [f"aten::a,10240.0,1000.000{TAB},1003.000{TAB},1003.000{TAB},3.000{TAB},3.000{TAB},"
           "110.0,200.0,110.0,125.0,200.0,125.0,7,NPU:0",
           f"aten::b,20480.0,1001.000{TAB},,,,,130.0,200.0,130.0,,,,7,NPU:0"]
    (out / "operator_memory.csv").write_text("\n".join([OPERATOR_HEADER, *ops]) + "\n")
    (parent / "hand_ascend_pt" / "profiler_info_0.json").write_text('{"rank_id": "0"}')
    return parent / "hand_ascend_pt"


REAL_FILES = {
    "pt_st_l2_rank0__profiler_info_0.json": "profiler_info_0.json",
    "pt_st_l2_rank0__memory_record.csv": "ASCEND_PROFILER_OUTPUT/memory_record.csv",
    "pt_st_l2_rank0__operator_memory.csv": "ASCEND_PROFILER_OUTPUT/operator_memory.csv",
    "pt_st_l2_rank0__npu_module_mem.csv": "ASCEND_PROFILER_OUTPUT/npu_module_mem.csv",
}


def real_profiler_folder(parent: Path) -> Path | None:
    """A ``*_ascend_pt`` folder of symbolic links to the real ``pt_st_l2_rank0__*`` files
    (torch_npu 2.7.1), or None where ../shared/data is absent."""
    data = SHARED_DATA / "profiler"
    if not all((data / name).is_file() for name in REAL_FILES):
        return None
    root = parent / "rank_0_ascend_pt"
    for name, where in REAL_FILES.items():
        target = root / where
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(data / name)
    return root
