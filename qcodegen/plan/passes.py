"""Schedule-to-schedule optimizations. Each pass keeps the schedule's meaning bit for bit."""

from __future__ import annotations

from collections.abc import Callable

from ..ir.schedule import Schedule

Pass = Callable[[Schedule], None]
PASSES: list[Pass] = []


def schedule_pass(fn: Pass) -> Pass:
    PASSES.append(fn)
    return fn


def run_passes(schedule: Schedule) -> None:
    for p in PASSES:
        p(schedule)


# registration order is run order: constant layouts, the rewrites, the folding, float32 requantizations as
# single-rounding RESCALEs, patch-based execution, fusion
from . import constants  # noqa: E402,F401,I001
from . import rewrite  # noqa: E402,F401,I001
from . import fold  # noqa: E402,F401,I001
from . import single_round  # noqa: E402,F401,I001
from . import patches  # noqa: E402,F401,I001
from . import fuse  # noqa: E402,F401,I001
