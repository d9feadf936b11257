"""Build the generated C, run it (in-process via cffi, or as a harness executable), compare with the
numpy reference bit for bit."""

from .check import VerifyResult, random_inputs, verify_schedule
from .runners import get_runner

__all__ = ["VerifyResult", "random_inputs", "verify_schedule", "get_runner"]
