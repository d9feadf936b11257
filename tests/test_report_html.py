"""The HTML report in a real browser: headless Chromium renders the page (no network, no scripts); the DOM holds
one box per arena tensor and one bar per layer, and the screenshot shows them."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from qcodegen import api
from qcodegen.report_html import render_csv

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
BAR_BLUE = (0x4A, 0x7B, 0xD0)


def _chromium(tmp_path: Path, *args: str) -> str:
    proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args], capture_output=True,
                          text=True, timeout=120, check=True)
    return proc.stdout


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("report") / "out"
    result = api.compile(ROOT / "examples" / "mobilenet_like.json", out)
    return out / f"{result.name}_report.html", result.report


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian package chromium; .ci/run installs it)")
def test_report_renders_its_figures_in_chromium(report, tmp_path):
    page, data = report
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.count('class="tensor"') == len(data["arena"]) > 0
    assert dom.count('class="bar"') == len(data["layers"]) > 0
    assert "live-set lower bound" in dom and f"{data['arena_bytes']:,} B" in dom

    from PIL import Image

    shot = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1800", page.as_uri())
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1800)
    colors = image.getcolors(maxcolors=1 << 20)
    bar_pixels = sum(n for n, c in colors if c == BAR_BLUE)
    saturated = {c for n, c in colors if n > 50 and max(c) - min(c) > 60}  # the tensors' distinct fills
    assert bar_pixels > 2000, "no MAC bars drawn"
    assert len(saturated) >= min(len({b["name"] for b in data["arena"]}), 6), "arena boxes missing"


def test_csv_has_one_row_per_layer(report):
    page, data = report
    rows = list(csv.DictReader(io.StringIO(render_csv(data))))
    assert len(rows) == len(data["layers"])
    assert [r["op"] for r in rows] == [layer["op"] for layer in data["layers"]]
    metadata = json.loads((page.parent / (page.stem.removesuffix("_report") + ".json")).read_text())
    assert metadata["macs"] == sum(int(r["macs"]) for r in rows)
