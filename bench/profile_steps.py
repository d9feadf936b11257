"""Instructions (and estimated cycles) per layer of one inference on QEMU targets, for the bench models by name
(`qcodegen profile MODEL -t TARGET` does one model file; qcodegen/verify/profile.py says how it counts).

    python bench/profile_steps.py examples/kws_like.json -t cortex-m4
    python bench/profile_steps.py ds_cnn mobilenet_v1_025 -t cortex-m4 cortex-m55      # bench/models.py models
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qcodegen import api  # noqa: E402
from qcodegen.verify.profile import table  # noqa: E402


def model_file(name: str, workdir: Path) -> Path:
    """A model path, or a bench model by name (bench/models.py: the MLPerf-Tiny-shaped models, person_detect)."""
    if Path(name).exists():
        return Path(name)
    from bench.models import model_path  # noqa: PLC0415 (pulls in TFLM's model builder only when needed)
    return model_path(name, workdir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="model files, or names of bench/models.py's models")
    ap.add_argument("-t", "--targets", nargs="+", default=["cortex-m4"])
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="qc-prof-") as tmp:
        workdir = Path(tmp)
        for name in args.models:
            path = model_file(name, workdir)
            for target in args.targets:
                print(f"## {name} on {target}\n```\n{table(api.profile(path, target=target))}\n```\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
