"""msMemScope rows with impossible values are skipped and counted; a CSV holding the DB's
JSON Attr is read as JSON, with a warning (issue 12, defect 3)."""

from __future__ import annotations

import csv
import io

from memtui.sources import open_capture
from tests.helpers.memscope_files import COLUMNS, SCENARIO, mem, write_db, write_text


def _csv_text(rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(row)
    return out.getvalue()


def test_the_db_scenario_reference(tmp_path):
    trace = open_capture(write_db(tmp_path / "memscope_dump_1.db", SCENARIO))
    assert trace.blocks.height == 5 and int(trace.blocks["ghost"].sum()) == 1


def test_a_malloc_of_negative_or_non_number_size_is_skipped_and_counted(tmp_path):
    bad = [mem(90, "MALLOC", "PTA", 1500, 90, 0x9000, -4096),
           mem(91, "MALLOC", "PTA", 1501, 91, 0xA000, "lots")]

    trace = open_capture(write_db(tmp_path / "memscope_dump_1.db", SCENARIO + bad))
    assert trace.blocks.height == 5  # not 7: neither bad MALLOC makes a block
    assert int(trace.blocks["size"].min()) > 0
    assert any("2 memory rows with a negative, missing or non-number size or total skipped" in w
               for w in trace.meta.warnings)


def test_a_csv_with_the_db_json_attr_is_read_as_json(tmp_path):
    """The DB's rows written to a CSV as they are: Attr in JSON form.  Read with the CSV
    grammar they gave 378 blocks, 164 ghosts on a real file; as JSON, the right ones."""
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv_text(SCENARIO))
    trace = open_capture(path)
    assert trace.blocks.height == 5
    assert int(trace.blocks["ghost"].sum()) == 1
    assert sorted(trace.blocks["size"].to_list()) == [256, 512, 1024, 2048, 4096]
    assert any("JSON Attr in a CSV" in w for w in trace.meta.warnings)


def test_rows_whose_columns_are_shifted_are_skipped_not_devices(tmp_path):
    """A timestamp where ``Device Id`` belongs (a CSV whose columns are shifted) made 130
    devices named ``npu:1764753365728889760`` and a negative reserved figure."""
    shifted = [mem(90 + i, "MALLOC", "PTA", 1500 + i, 90 + i, 0x9000 + i * 0x1000, 4096,
                   dev=str(1764753365728889760 + i), total=-18874368, used=4096)
               for i in range(5)]
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv_text(SCENARIO + shifted))
    trace = open_capture(path)
    assert trace.meta.device_names == open_capture(
        write_text(tmp_path / "memscope_dump_2.csv", _csv_text(SCENARIO))).meta.device_names
    assert not any("1764753365728889760" in name for name in trace.meta.device_names)
    assert any("5 rows skipped whose Device Id is no device (1764753365728889760)" in w
               for w in trace.meta.warnings)
    from memtui.analysis.summary import summary

    for device in summary(trace)["devices"]:
        for key, value in device.items():
            if key.endswith("_bytes") and isinstance(value, int):
                assert value >= 0, (key, value)


def test_a_negative_pool_total_is_skipped(tmp_path):
    bad = [mem(90, "MALLOC", "PTA", 1500, 90, 0x9000, 4096, total=-18874368, used=4096)]
    trace = open_capture(write_db(tmp_path / "memscope_dump_1.db", SCENARIO + bad))
    assert trace.blocks.height == 5
    reserved = trace.events["reserved"].drop_nulls()
    assert reserved.is_empty() or int(reserved.min()) >= 0


def test_shifted_rows_are_skipped_in_every_chunk_after_the_devices_are_known(tmp_path,
                                                                             monkeypatch):
    """The Device Ids a file names are judged once (then known possible): a shifted row in
    any later chunk, its value seen before or not, is still skipped and counted."""
    from memtui.sources.memscope import read

    monkeypatch.setattr(read, "_CHUNK_ROWS", 3)
    shifted = [mem(90 + i, "MALLOC", "PTA", 1500 + i, 90 + i, 0x9000 + i * 0x1000, 4096,
                   dev="1764753365728889760", total=-18874368, used=4096) for i in range(6)]
    path = write_text(tmp_path / "memscope_dump_1.csv", _csv_text(SCENARIO + shifted))
    trace = open_capture(path)
    assert not any("1764753365728889760" in name for name in trace.meta.device_names)
    assert any("6 rows skipped whose Device Id is no device (1764753365728889760)" in w
               for w in trace.meta.warnings)
    assert trace.blocks.height == 5
