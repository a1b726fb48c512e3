"""`server.listening.percentiles.percentile` is `numpy.percentile`'s default method, exactly,
on the runs of window levels server VAD keeps (it replaced numpy's in the per-window code)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.listening.percentiles import percentile

levels = st.lists(st.floats(min_value=-120.0, max_value=0.0, allow_nan=False), min_size=1,
                  max_size=400)
quantiles = st.one_of(st.sampled_from([0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 100.0]),
                      st.floats(min_value=0.0, max_value=100.0))


@given(levels, quantiles)
def test_it_equals_numpy_s_default_percentile_bit_for_bit(values: list[float], q: float) -> None:
    assert percentile(values, q) == float(np.percentile(values, q))


def test_repeated_levels_and_one_level() -> None:
    assert percentile([-40.0] * 31, 90.0) == -40.0
    assert percentile([-62.5], 10.0) == -62.5
    assert percentile([-30.0, -10.0], 50.0) == -20.0


def test_no_levels_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50.0)
