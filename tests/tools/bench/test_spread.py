"""`disagg_tools.bench.rules.spread`: a figure's median beside its nearest-rank p10 and p90,
on fixed values whose answers are known."""

from __future__ import annotations

import pytest

from disagg_tools.bench import stream
from disagg_tools.bench.rules.spread import percentile, spread


def test_spread_is_the_median_beside_nearest_rank_p10_and_p90() -> None:
    values = [7.0, 1.0, 3.0, 9.0, 5.0, 2.0, 8.0, 4.0, 10.0, 6.0]
    assert spread(values) == {"median": 5.5, "p10": 1.0, "p90": 9.0}
    assert spread([4.0, 2.0, 3.0]) == {"median": 3.0, "p10": 2.0, "p90": 4.0}
    assert spread([1.23456]) == {"median": 1.235, "p10": 1.235, "p90": 1.235}
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0 and percentile([], 90) == 0.0
    with pytest.raises(ValueError, match="no values"):
        spread([])
    # the stream module offers the same functions to the benches it times
    assert (stream.spread, stream.percentile) == (spread, percentile)
