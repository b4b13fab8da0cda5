"""The one JSONL reader (line by line, a cut last line forgiven), ``ends_cut`` and the writers."""

import json
import logging

import pytest

from ifir_lib.core.errors import DataError
from ifir_lib.core.jsonl import append_jsonl, ends_cut, read_jsonl, write_jsonl


def _file(tmp_path, data: bytes):
    p = tmp_path / "f.jsonl"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    "data, rows, cut",
    [
        (b'{"k": 1}\n{"k": 2}\n', [(1, {"k": 1}), (2, {"k": 2})], False),
        (b'{"k": 1}\n{"k": 2}', [(1, {"k": 1}), (2, {"k": 2})], True),  # only the newline was lost
        (b'\xef\xbb\xbf{"k": 1}\r\n\r\n  \n{"k": 2}\r\n', [(1, {"k": 1}), (4, {"k": 2})], False),
        (b"", [], False),
        (b"\xef\xbb\xbf", [], False),
        (b'{"k": 1}\n  ', [(1, {"k": 1})], True),
    ],
)
def test_rows_line_numbers_and_cut(tmp_path, data, rows, cut):
    p = _file(tmp_path, data)
    assert list(read_jsonl(p)) == rows and ends_cut(p) is cut


def test_a_cut_last_line_is_dropped_with_a_warning(tmp_path, caplog):
    p = _file(tmp_path, b'{"k": 1}\n{"k": 2')
    with caplog.at_level(logging.WARNING):
        assert list(read_jsonl(p)) == [(1, {"k": 1})]
    assert f"{p}: dropping a cut last line (7 bytes)" in caplog.text and ends_cut(p)


@pytest.mark.parametrize(
    "data, message",
    [
        (b'a\n{"k": 1}\n{"k": 2', r"f.jsonl:1: invalid JSON \(Expecting value at column 1\)$"),
        (
            b'{"k": 1}\n{"k": 2\n{"k": 3}\n',
            r"f.jsonl:2: invalid JSON \(Expecting ',' delimiter at column 8\)",
        ),
        (b'{"k": 1}\n"s"\n', r"f.jsonl:2: expected a JSON object, got str$"),
        (b'{"k": "\xff"}\n', r"f.jsonl:1: not UTF-8 text \(byte 7\)"),
        (
            b'[{"k": 1}, {"k": 2}]',
            r"f.jsonl:1: expected a JSON object, got list; the file looks like a JSON array",
        ),
        (b"[\n  {}\n]\n", r"f.jsonl:1: invalid JSON .*; the file looks like a JSON array"),
    ],
)
def test_other_bad_lines_name_file_and_line(tmp_path, data, message):
    with pytest.raises(DataError, match=message):
        list(read_jsonl(_file(tmp_path, data)))


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope.jsonl: file not found"):
        list(read_jsonl(tmp_path / "nope.jsonl"))


def test_reader_streams(tmp_path):
    """Rows come as the file is read: a bad line far down is not reached before the first row."""
    p = _file(tmp_path, b'{"k": 1}\n' + b'{"k": 0}\n' * 1000 + b"broken\n")
    rows = read_jsonl(p)
    assert next(rows) == (1, {"k": 1})
    with pytest.raises(DataError, match=r":1002: invalid JSON"):
        list(rows)


def test_write_and_append_round_trip(tmp_path):
    p = tmp_path / "sub" / "out.jsonl"
    write_jsonl(p, iter([{"k": "é"}]), fsync=False)
    append_jsonl(p, [{"k": 2}, {"k": 3}], fsync=False)
    assert "é" in p.read_text(encoding="utf-8") and not ends_cut(p)
    assert [r for _, r in read_jsonl(p)] == [{"k": "é"}, {"k": 2}, {"k": 3}]
    assert [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines()][0] == {"k": "é"}
    assert [f.name for f in p.parent.iterdir()] == ["out.jsonl"]  # no temp file left behind
