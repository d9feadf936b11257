"""Lines of C inside the Jinja templates and the longest macro (issue 15's measure of kernel code kept in templates).

    python scripts/template_stats.py [TEMPLATES_DIR]

A line counts as C when something other than whitespace is left after removing Jinja comments ({# ... #}, also
across lines) and statements ({% ... %}); expressions ({{ ... }}) emit C and count. The longest macro is the
largest number of lines from a `{% macro %}` to its `{% endmacro %}` (comments included). Linker scripts and
Makefiles are not C and are left out."""

from __future__ import annotations

import re
import sys
from pathlib import Path

_COMMENT = re.compile(r"\{#.*?#\}", re.S)
_STATEMENT = re.compile(r"\{%.*?%\}", re.S)


def c_lines(text: str) -> int:
    without = _STATEMENT.sub("", _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text))
    return sum(1 for line in without.splitlines() if line.strip())


def longest_macro(text: str) -> tuple[int, str]:
    best, name, stack = (0, ""), "", []
    for number, line in enumerate(text.splitlines(), 1):
        for tag in re.findall(r"\{%-?\s*(macro\s+\w+|endmacro)", line):
            if tag.startswith("macro"):
                stack.append((number, tag.split()[1]))
            elif stack:
                start, name = stack.pop()
                best = max(best, (number - start + 1, name))
    return best


def main(root: Path) -> None:
    files = sorted(p for p in root.rglob("*.j2") if p.name.endswith(".c.j2") or p.name.endswith(".h.j2")
                   or p.suffix == ".j2" and not p.name.startswith(("Makefile", "qc_cortex_m.ld")))
    total, longest = 0, (0, "", "")
    for path in files:
        text = path.read_text()
        n = c_lines(text)
        size, name = longest_macro(text)
        total += n
        longest = max(longest, (size, name, str(path.relative_to(root))))
        print(f"{n:6d}  {path.relative_to(root)}  (longest macro {name or '-'}: {size} lines)")
    print(f"{total:6d}  lines of C in {len(files)} templates; longest macro: {longest[1]} in {longest[2]}, "
          f"{longest[0]} lines")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "templates")
