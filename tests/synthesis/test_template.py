"""The template baseline: polarity words flipped sentence by sentence."""

import pytest

from ifir_lib.synthesis import template as tb


@pytest.mark.parametrize(
    "instruction, expected",
    [
        ("Exclude studies published before 2010.", "Only include studies published before 2010."),
        ("Documents must be peer-reviewed.", "Documents must not be peer-reviewed."),
        ("Only consider documents written for experts.", "Do not consider documents written for experts."),
        # one swap per sentence; each sentence flips
        (
            "Relevant documents must cite trials. Blog posts are not relevant.",
            "Relevant documents must not cite trials. Blog posts are relevant.",
        ),
        ("I only want information about the 1990s.", "I do not want information about the 1990s."),
        ("Only carcass-search field surveys.", "Anything except carcass-search field surveys."),
        (
            "Written for a general audience",
            "Find documents that do not satisfy this requirement: Written for a general audience",
        ),
    ],
)
def test_template_reversal(instruction, expected):
    assert tb.template_reversal(instruction) == expected
