"""The explorer: the example table, filters, word diff, scores, and the curation file, headless."""

import json

from ifir_lib.curation import widgets as iw
from ifir_lib.curation.decisions import load_decisions as load_curation
from support.fakes import flip_encoder

# ---- pure functions ----------------------------------------------------------------------------


# ---- the widget, driven as a user would --------------------------------------------------------


def test_explorer_navigation_filters_and_position(explorer_seeds, explorer_rows, tmp_path):
    e = iw.Explorer(explorer_seeds, explorer_rows, curation_path=tmp_path / "c.jsonl")
    assert e.position_label.value == "1 / 3" and e.current["key"] == "s0" and e.prev_button.disabled
    assert "<del" in e.detail.value and "<ins" in e.detail.value  # the instruction diff is shown
    e.next_button.click()
    assert e.position_label.value == "2 / 3" and e.current["key"] == "s1#1"
    assert "no reversal (declined: no sound reversal)" in e.detail.value
    e.next_button.click()
    e.next_button.click()  # stops at the end
    assert e.position_label.value == "3 / 3" and e.next_button.disabled
    e.prev_button.click()
    assert e.current["key"] == "s1#1"
    e.type_filter.value = "geography"  # s1#1 no longer matches -> first
    assert e.position_label.value == "1 / 2" and e.current["key"] == "s0"
    e.next_button.click()
    e.backend_filter.value = "openai"  # s2 still matches: stays on it
    assert e.current["key"] == "s2" and e.position_label.value == "2 / 2"
    e.verify_filter.value = "passed"
    assert e.position_label.value == "1 / 1" and e.current["key"] == "s0"
    e.status_filter.value = "rejected"
    assert e.position_label.value == "0 / 0" and e.current is None and e.accept_button.disabled
    assert "No example matches" in e.detail.value
    e.accept_button.click()  # nothing on screen: nothing written
    assert not (tmp_path / "c.jsonl").exists()
    e.status_filter.value = e.verify_filter.value = e.type_filter.value = e.backend_filter.value = "(all)"
    e.search_box.value = "after 2020"
    assert e.position_label.value == "1 / 1" and e.current["key"] == "s1#1"
    assert set(e.type_filter.options) == {"(all)", "geography", "timeframe"}
    assert set(e.backend_filter.options) == {"(all)", "openai", "template"}


def test_explorer_buttons_persist_to_the_curation_file(explorer_seeds, explorer_rows, tmp_path):
    path = tmp_path / "c.jsonl"
    e = iw.Explorer(explorer_seeds, explorer_rows, curation_path=path)
    e.accept_button.click()  # s0, then moves on to s1#1
    assert e.current["key"] == "s1#1"
    e.comment_box.value = "the negative is borderline"
    e.comment_button.click()
    e.reject_button.click()
    e.prev_button.click()
    e.prev_button.click()
    e.comment_box.value = "on second thought"
    e.reject_button.click()  # s0 again: the comment travels with it
    rows_ = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(r["key"], r["decision"], r["comment"]) for r in rows_] == [
        ("s0", "accept", None),
        ("s1#1", None, "the negative is borderline"),
        ("s1#1", "reject", None),
        ("s0", "reject", "on second thought"),
    ]
    assert load_curation(path) == {"s0": "reject", "s1#1": "reject"}
    # a new kernel: state comes back from the file
    e2 = iw.Explorer(explorer_seeds, explorer_rows, curation_path=path)
    assert "<b>Decision:</b> reject" in e2.detail.value and "on second thought" in e2.detail.value
    e2.decision_filter.value = "undecided"
    assert e2.position_label.value == "1 / 1" and e2.current["key"] == "s2"
    e2.accept_button.click()  # s2 leaves the undecided view on refresh
    e2.decision_filter.value = "accept"
    assert [k for k in e2.filtered["key"]] == ["s2"]


def test_explorer_decides_each_backends_row_of_one_key_apart(explorer_seeds, explorer_rows, tmp_path):
    """Two outputs loaded together hold the key s0 twice: a decision on one row is not the other's."""
    tmpl = {**explorer_rows[0], "backend": "template", "model": None, "reversal": "Not UK sources."}
    e = iw.Explorer(explorer_seeds, [explorer_rows[0], tmpl], curation_path=tmp_path / "c.jsonl")
    e.backend_filter.value = "openai"
    e.reject_button.click()
    e.backend_filter.value = "template"
    e.accept_button.click()
    e.backend_filter.value = "openai"
    assert e.current["key"] == "s0" and "<b>Decision:</b> reject" in e.detail.value
    e.backend_filter.value = "(all)"
    e.decision_filter.value = "reject"
    assert list(e.filtered["backend"]) == ["openai"]
    cur = load_curation(tmp_path / "c.jsonl")
    assert [j["decision"] for j in cur.judged["s0"].values()] == ["reject", "accept"]


def test_explorer_shows_model_scores_and_flip(explorer_seeds, tmp_path):
    s = explorer_seeds[0]
    e = iw.Explorer(
        explorer_seeds[:1], curation_path=tmp_path / "c.jsonl", model=flip_encoder(s, s["reference_reversal"])
    )
    assert "<b>Model flips:</b> yes" in e.detail.value and "score 0.994" in e.detail.value
    e2 = iw.Explorer(explorer_seeds[:1], curation_path=tmp_path / "c.jsonl")  # no model: a hint, no scores
    assert "Model flips" not in e2.detail.value and "type a model name" in e2.detail.value
    e2.model_box.value = "/no/such/model"  # a bad name is reported, not raised
    assert "model not loaded" in e2.detail.value


def test_load_for_inspection_falls_back_to_reference_reversals(explorer_seeds, explorer_rows, tmp_path):
    seeds_file, synth = tmp_path / "seeds.jsonl", tmp_path / "reversals.jsonl"
    seeds_file.write_text("".join(json.dumps(s) + "\n" for s in explorer_seeds))
    got_seeds, got_rows = iw.load_for_inspection(seeds_file, tmp_path / "absent.jsonl")
    assert [s["id"] for s in got_seeds] == ["s0", "s1", "s2"] and got_rows is None
    synth.write_text("".join(json.dumps(r) + "\n" for r in explorer_rows))
    other = tmp_path / "other_backend.jsonl"
    other.write_text(
        json.dumps({**explorer_rows[0], "backend": "reference"}) + "\n"
    )  # same key, another backend
    _, got_rows = iw.load_for_inspection(seeds_file, [synth, other])
    assert [(r["key"], r["backend"]) for r in got_rows] == [
        ("s0", "openai"),
        ("s1#1", "template"),
        ("s2", "openai"),
        ("s0", "reference"),
    ]


def test_load_for_inspection_shows_each_seed_s_current_row(explorer_seeds, explorer_rows, tmp_path, caplog):
    """After a seed's edit and ``--redo-changed``, the row written for the seed as it is now is
    shown (not the stale first row), as training takes it; a row whose seed was removed from the
    seeds file is left out with a warning instead of stopping the explorer."""
    from ifir_lib.seeds.schema import seed_fingerprint

    seeds = [dict(s) for s in explorer_seeds]
    old = {**explorer_rows[0], "seed_sha": seed_fingerprint(seeds[0], 0), "reversal": "old text"}
    seeds[0]["instruction"] += " (edited)"
    redone = {**old, "seed_sha": seed_fingerprint(seeds[0], 0), "reversal": "new text"}
    orphan = {**explorer_rows[2], "key": "gone", "seed_id": "gone"}
    seeds_file, synth = tmp_path / "seeds.jsonl", tmp_path / "reversals.jsonl"
    seeds_file.write_text("".join(json.dumps(s) + "\n" for s in seeds))
    synth.write_text("".join(json.dumps(r) + "\n" for r in [old, orphan, redone, *explorer_rows[1:]]))
    with caplog.at_level("WARNING"):
        _, rows = iw.load_for_inspection(seeds_file, synth)
    assert [(r["key"], r.get("reversal")) for r in rows][0] == ("s0", "new text")
    assert [r["key"] for r in rows] == ["s0", "s1#1", "s2"]
    assert "1 row(s) name a seed that is not in the seeds given, e.g. gone" in caplog.text
    iw.Explorer(seeds, rows, curation_path=tmp_path / "c.jsonl")  # opens: no row without its seed
    synth.write_text(json.dumps(old) + "\n")  # only the stale row: not shown, named
    with caplog.at_level("WARNING"):
        assert iw.load_for_inspection(seeds_file, synth)[1] == []
    assert "written for an earlier version of their seed" in caplog.text


def test_a_click_that_overturns_another_sessions_decision_says_so(explorer_seeds, explorer_rows, tmp_path):
    """Two explorers (two tabs of notebook 02) on one file: the second one's accept of a reversal
    the first rejected since is written (the last decision wins), and its status line says so:
    a log line from a button's handler shows nowhere in a notebook."""
    path = tmp_path / "c.jsonl"
    first, second = (iw.Explorer(explorer_seeds, explorer_rows, curation_path=path) for _ in range(2))
    first.reject_button.click()
    second.accept_button.click()
    assert "accepted s0" in second.status_line.value
    assert "another session recorded 'reject'" in second.status_line.value
    assert load_curation(path) == {"s0": "accept"}
    first.next_button.click()
    first.accept_button.click()  # s1#1: decided by no one else
    assert "warning" not in first.status_line.value
