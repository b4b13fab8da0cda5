"""reporting.reading: the sentences notebook 05 prints agree with the numbers and name the interval."""

import pandas as pd

from ifir_lib.reporting.reading import read_results


def _table(dv: tuple[float, float, float], orig: tuple[float, float, float]) -> pd.DataFrame:
    rows = []
    for mode, (v, lo, hi) in (("ins-dv", dv), ("ins-orig", orig)):
        rows.append(
            dict(
                run_id=f"{mode}-0",
                model=f"runs/{mode}",
                backbone="minilm",
                mode=mode,
                rng_seed=0,
                dataset="followir_v2",
                metric="p_mrr",
                value=v,
                ci_low=lo,
                ci_high=hi,
            )
        )
    return pd.DataFrame(rows)


def test_one_run_per_mode_names_the_query_interval_and_the_caveat():
    text = read_results(_table((6.0, 4.0, 8.0), (2.0, 1.0, 3.5)), "followir_v2")
    assert "bundled set v2" in text and "p-MRR 6.00 (95% bootstrap CI over queries: 4.00 to 8.00)" in text
    assert "2.00 (95% bootstrap CI over queries: 1.00 to 3.50)" in text
    assert "the difference is +4.00 and the bars do not overlap" in text
    assert "says nothing about another training run" in text


def test_overlapping_bars_are_read_as_no_difference():
    text = read_results(_table((3.0, 1.0, 5.0), (2.0, 0.0, 4.0)), "followir_v2")
    assert "the difference is +1.00 and the bars overlap, so these runs do not show a difference" in text


def test_a_missing_mode_or_set_is_said_not_guessed():
    table = _table((3.0, 1.0, 5.0), (2.0, 0.0, 4.0))
    assert "has no p-MRR" in read_results(table, "followir_v2", b="ins-aug")
    assert read_results(table, "followir_mini") == "No p-MRR on bundled set v1 in the results table."


def test_missing_intervals_are_said_not_read_as_a_difference():
    """Rows evaluated with --bootstrap 0: NaN bounds compared as "do not overlap"."""
    nan = float("nan")
    text = read_results(_table((1.4, nan, nan), (1.0, nan, nan)), "followir_v2")
    assert "p-MRR 1.40 (no interval recorded" in text and "nan" not in text
    assert "the bars cannot be compared" in text and "do not overlap" not in text


def test_one_backbone_under_two_spellings_is_one_backbone():
    """The base row names the packaged folder, the run 'minilm': one backbone, as in ifir table."""
    from ifir_lib.core.models import resolve_model

    table = _table((6.0, 4.0, 8.0), (2.0, 1.0, 3.5))
    table.loc[1, "backbone"] = resolve_model("minilm")
    text = read_results(table, "followir_v2")
    assert text.startswith("On bundled set v2, all-MiniLM-L6-v2:") and "no p-MRR" not in text
