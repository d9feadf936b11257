import os
from pathlib import Path

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=10, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("QC_HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("QC_SHARED_DIR", ROOT.parent / "shared"))
