"""The TFX blessing never passes a broken model or an empty split."""

import math

from components.ranking_evaluator import blessing_refusals


def test_nan_metric_is_not_blessed_even_against_a_baseline():
    reasons = blessing_refusals("ndcg@10", math.nan, 100, threshold=0.0, baseline_value=0.1)
    assert reasons and "not finite" in reasons[0]


def test_infinite_metric_is_not_blessed():
    assert blessing_refusals("ndcg@10", math.inf, 100, threshold=0.0)


def test_empty_split_is_not_blessed():
    # An empty split gives a NaN mean; `nan < threshold` is False, which used to bless it.
    reasons = blessing_refusals("ndcg@10", math.nan, 0, threshold=0.0)
    assert "the split has no cases to evaluate" in reasons


def test_threshold_and_baseline():
    assert blessing_refusals("ndcg@10", 0.2, 10, threshold=0.1) == []
    assert blessing_refusals("ndcg@10", 0.05, 10, threshold=0.1) == [
        "ndcg@10 0.0500 is below the threshold 0.1000"
    ]
    assert blessing_refusals("ndcg@10", 0.2, 10, threshold=0.0, baseline_value=0.2)  # must beat, not tie
    assert (
        blessing_refusals("ndcg@10", 0.2, 10, threshold=0.0, baseline_value=math.nan) == []
    )  # a broken baseline
