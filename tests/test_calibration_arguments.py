"""Duration arguments of the calibration package (`calibration.arguments.positive_seconds`)
and the constructors that use it."""

import math

import pytest

from calibration.arguments import positive_seconds
from calibration.history_calibration import HistoryCalibration
from calibration.policies import marks_policy


def test_positive_seconds_takes_ints_and_floats() -> None:
    assert positive_seconds("timeout_s", 2) == 2.0
    assert positive_seconds("timeout_s", 0.25) == 0.25


@pytest.mark.parametrize("value", [0, -1, 0.0, math.inf, math.nan, True, "1", None])
def test_positive_seconds_refuses_what_is_not_a_duration(value: object) -> None:
    with pytest.raises(ValueError, match=r"^budget_s must be a positive finite number$"):
        positive_seconds("budget_s", value)


def test_history_calibration_refuses_a_bad_timeout_by_name() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        HistoryCalibration(object(), marks_policy(), timeout_s=math.nan)  # type: ignore[arg-type]
