"""The curation file: last decision wins, comments kept, survives a restart."""

import json

import pytest

from ifir_lib.curation import widgets as iw
from ifir_lib.curation.decisions import load_decisions as load_curation


def test_curation_store_last_decision_wins_and_survives_restart(tmp_path):
    path = tmp_path / "sub" / "curation.jsonl"
    st = iw.CurationStore(path)
    st.record("s0", "accept")
    st.record("s0", None, "looks fine")
    st.record("s1", "reject", "N* is still excluded")
    st.record("s0", "reject")
    with pytest.raises(ValueError):
        st.record("s0", "maybe")
    with pytest.raises(ValueError):
        st.record("s0")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 4 and set(lines[0]) == {"key", "decision", "comment", "time"}
    assert lines[1] == {**lines[1], "key": "s0", "decision": None, "comment": "looks fine"}
    again = iw.CurationStore(path)
    assert again.decisions == {"s0": "reject", "s1": "reject"} == load_curation(path)
    assert again.comments == {"s0": ["looks fine"], "s1": ["N* is still excluded"]}
    assert again.summary() == {"accept": 0, "reject": 2, "commented": 2}
