"""What `check_gradients` reports: one `Check` per comparison, gathered in a
`GradientCheckReport`; a failed check raises `GradientCheckError`, which carries the report.

>>> report = GradientCheckReport("f", [Check("VJP vs finite differences", "args[0]", 1e-9, 1e-5)])
>>> report.passed, len(report.failures)
(True, 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field


class GradientCheckError(AssertionError):
    """Raised by `check_gradients` when a gradient does not match; `.report` has every check."""

    def __init__(self, message: str, report: GradientCheckReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class Check:
    """One comparison: what was compared, where, the observed error and the allowed error."""

    name: str
    where: str
    error: float
    allowed: float

    @property
    def passed(self) -> bool:
        return self.error <= self.allowed  # NaN fails

    def __str__(self) -> str:
        mark = "ok  " if self.passed else "FAIL"
        return f"{mark} {self.name:<32} {self.where:<28} error {self.error:.3g} <= {self.allowed:.3g}"


@dataclass
class GradientCheckReport:
    """What `check_gradients` compared: the function's name and every `Check`; `passed` is True
    when all passed, `failures` lists those that did not, and `str()` prints one line per check."""

    function: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def __str__(self) -> str:
        lines = [f"check_gradients({self.function}): {len(self.checks)} checks, "
                 f"{len(self.failures)} failed"]
        return "\n".join(lines + [f"  {c}" for c in self.checks])
