"""A calibration result: a heard-prefix offset that carries how it was found.

`HeardCut` is an `int` (an exclusive code-point offset into the reply text, what the calibration
API's callbacks return) with its provenance: the policy, the ASR transcript and whether marks and
ASR agreed. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable


class HeardCut(int):
    """A calibration result: an exclusive code-point offset with its provenance.

    Attributes:
        method: "marks" | "asr" | "ratio" for the built-in policies, "custom" for a plain int.
        asr_text: the transcript of the played audio when ASR ran (for display only; it is never
            written into history), else None.
        marks_agree: when both marks and ASR ran, whether the ASR cut equals the marks cut;
            None when no cross-check ran.
        cross_check: for a marks cut, the still-running ASR cross-check (an awaitable of
            (asr_text, marks_agree)); the cut is applied at once and the session reports the
            cross-check when it finishes, so ASR never delays the next prompt. None otherwise.
    """

    method: str
    asr_text: str | None
    marks_agree: bool | None
    cross_check: Awaitable[tuple[str | None, bool | None]] | None

    def __new__(
        cls,
        value: int,
        *,
        method: str = "custom",
        asr_text: str | None = None,
        marks_agree: bool | None = None,
        cross_check: Awaitable[tuple[str | None, bool | None]] | None = None,
    ) -> HeardCut:
        """Create a cut at code-point offset `value` (an int, not a bool)."""
        self = super().__new__(cls, value)
        self.method = method
        self.asr_text = asr_text
        self.marks_agree = marks_agree
        self.cross_check = cross_check
        return self

    @classmethod
    def of(cls, value: int) -> HeardCut:
        """Return `value` itself when it is a `HeardCut`, else a cut with method "custom"."""
        return value if isinstance(value, HeardCut) else cls(value)

    def at(self, value: int) -> HeardCut:
        """This cut itself when it is at `value`, else the same provenance at `value`."""
        if value == self:
            return self
        return HeardCut(value, method=self.method, asr_text=self.asr_text,
                        marks_agree=self.marks_agree, cross_check=self.cross_check)

    def __repr__(self) -> str:
        return (
            f"HeardCut({int(self)}, method={self.method!r}, "
            f"asr_text={'<set>' if self.asr_text is not None else None}, "
            f"marks_agree={self.marks_agree!r})"
        )
