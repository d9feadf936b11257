"""docs/python-api.md: every python block runs, in order, in one namespace, in a temporary folder."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_python_api_doc_examples_run(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python-api.md").read_text(), re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    namespace = {"EXAMPLES": ROOT / "examples"}
    for block in blocks:
        exec(compile(block, "docs/python-api.md", "exec"), namespace)  # noqa: S102
    assert "kws_like" in capsys.readouterr().out

