"""The compile report as one self-contained HTML page (inline CSS and SVG; no scripts, no network) and as CSV.

Input: the report dictionary of qcodegen/report.py (`inspect_dict`, with `layers` and `arena`), optionally with
`instructions` per layer (a profiling run on a target). Figures: the arena timeline (each arena tensor a box over its
lifetime and its byte range, the live-set lower bound marked), MACs per layer and, when measured, instructions per
layer."""

from __future__ import annotations

import csv
import hashlib
import html
import io
from typing import Any

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#1d2330;
padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde2ea;padding-bottom:4px}
.sub{color:#5a6375;margin-bottom:16px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{border:1px solid #dde2ea;border-radius:8px;padding:10px 14px;min-width:150px;background:#f8fafc}
.card b{display:block;font-size:20px}.card span{color:#5a6375;font-size:12px}
table{border-collapse:collapse;width:100%;font-size:12.5px}
th,td{border-bottom:1px solid #e6e9ef;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f1f4f8;position:sticky;top:0}td.n{text-align:right;font-variant-numeric:tabular-nums}
svg text{font:11px system-ui,sans-serif;fill:#1d2330}.note{color:#5a6375;font-size:12.5px}
figure{margin:8px 0 0}figcaption{color:#5a6375;font-size:12.5px;margin-top:4px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(v: int | float | None) -> str:
    return "" if v is None else f"{v:,}"


def _color(name: str) -> str:
    hue = int(hashlib.sha1(name.encode()).hexdigest()[:4], 16) % 360
    return f"hsl({hue},55%,62%)"


def arena_timeline_svg(report: dict[str, Any], width: int = 1100, height: int = 320) -> str:
    """Each arena tensor as a box: x = its lifetime in execution positions, y = its byte range."""
    blocks, positions = report["arena"], max(len(report["layers"]), 1)
    size = max(report["arena_bytes"], 1)
    left, top, bottom = 70, 10, 30
    plot_w, plot_h = width - left - 10, height - top - bottom
    col = plot_w / positions

    def y(offset: float) -> float:
        return top + plot_h * (1 - offset / size)

    parts = [f'<svg class="figure" role="img" aria-label="arena timeline" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fbfcfe" stroke="#c9d0dc"/>']
    for b in blocks:
        x0 = left + b["first"] * col
        w = (b["last"] - b["first"] + 1) * col
        y1, y0 = y(b["offset"] + b["bytes"]), y(b["offset"])
        tip = (f'{b["name"]}: {b["bytes"]:,} B at offset {b["offset"]:,}, live at positions '
               f'{b["first"]}..{b["last"]}')
        parts.append(f'<rect class="tensor" x="{x0:.1f}" y="{y1:.1f}" width="{max(w - 1, 1):.1f}" '
                     f'height="{max(y0 - y1, 1):.1f}" fill="{_color(b["name"])}" stroke="#334" stroke-width="0.4">'
                     f'<title>{_e(tip)}</title></rect>')
    bound = report["arena_lower_bound_bytes"]
    layer_bound = report.get("arena_layer_bound_bytes", bound)
    for value, label, color in ((bound, "live-set lower bound", "#c0392b"),
                                (layer_bound if layer_bound != bound else 0, "layer-wise bound", "#8e44ad")):
        if not value or value > size:
            continue
        yb = y(value)
        label_y = yb + 13 if yb < top + 14 else yb - 4
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{yb:.1f}" y2="{yb:.1f}" stroke="{color}" '
                     f'stroke-dasharray="6 4"/><text x="{left + plot_w - 4}" y="{label_y:.1f}" text-anchor="end" '
                     f'fill="{color}">{label} {value:,} B</text>')
    for frac in (0, 0.25, 0.5, 0.75, 1):
        v = round(size * frac)
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:,}</text>')
    step = max(1, positions // 20)
    for p in range(0, positions, step):
        parts.append(f'<text x="{left + (p + 0.5) * col:.1f}" y="{height - 12}" text-anchor="middle">{p}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 1}" text-anchor="middle">layer (execution '
                 f'order)</text><text x="12" y="{top + plot_h / 2:.0f}" transform="rotate(-90 12 '
                 f'{top + plot_h / 2:.0f})" text-anchor="middle">arena offset (bytes)</text></svg>')
    return "".join(parts)


def bars_svg(labels: list[str], values: list[int], what: str, width: int = 1100) -> str:
    """Horizontal bars, one per layer, with the value and its share of the total."""
    row, left, right = 16, 300, 170
    height = row * len(values) + 10
    peak, total = max(values, default=0) or 1, sum(values) or 1
    parts = [f'<svg class="figure" role="img" aria-label="{_e(what)} per layer" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">']
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        yy = 5 + i * row
        w = (width - left - right) * v / peak
        parts.append(f'<text x="{left - 6}" y="{yy + 11}" text-anchor="end">{_e(label[:48])}</text>'
                     f'<rect class="bar" x="{left}" y="{yy + 2}" width="{max(w, 0.5):.1f}" height="{row - 4}" '
                     f'fill="#4a7bd0"><title>{_e(label)}: {v:,} {what}</title></rect>'
                     f'<text x="{left + w + 6:.1f}" y="{yy + 11}">{v:,} ({100 * v / total:.1f}%)</text>')
    parts.append("</svg>")
    return "".join(parts)


def _layer_label(layer: dict[str, Any]) -> str:
    return f'{layer["position"]} {layer["op"]}'


def _cards(report: dict[str, Any]) -> str:
    rom, ram = report.get("rom"), report.get("ram")
    items = [("MACs", _num(report["macs"])),
             ("weights (flash)", f'{report["weights_bytes"]:,} B'),
             ("arena", f'{report["arena_bytes"]:,} B'),
             ("arena lower bound (executed schedule)", f'{report["arena_lower_bound_bytes"]:,} B'),
             ("layer-wise bound", f'{report.get("arena_layer_bound_bytes", report["arena_lower_bound_bytes"]):,} B'),
             ("recomputed MACs", _num(report.get("recomputed_macs", 0)))]
    scratch = report.get("kernel_stack_scratch")
    if scratch:
        where = f' (step {scratch["step"]}, {scratch["kernel"]})' if scratch["bytes"] else ""
        items.append(("stack scratch of kernels" + where, f'{scratch["bytes"]:,} B'))
    if rom:
        items.append(("ROM = " + " + ".join(rom["parts"]), f'{rom["bytes"]:,} B'))
    if ram:
        items.append(("RAM = " + " + ".join(ram["parts"]), f'{ram["bytes"]:,} B'))
    return '<div class="cards">' + "".join(f"<div class=\"card\"><b>{_e(v)}</b><span>{_e(k)}</span></div>"
                                           for k, v in items) + "</div>"


def _io_table(report: dict[str, Any]) -> str:
    rows = []
    for kind in ("inputs", "outputs"):
        for t in report[kind]:
            q = f'scale {t["scale"]:.9g}, zero point {t["zero_point"]}' if "scale" in t else ""
            rows.append(f"<tr><td>{kind[:-1]}</td><td>{_e(t['name'])}</td><td>{_e('x'.join(map(str, t['shape'])))}"
                        f"</td><td>{_e(t['dtype'])}</td><td>{_e(q)}</td></tr>")
    return ("<table><tr><th></th><th>tensor</th><th>shape</th><th>type</th><th>quantization</th></tr>"
            + "".join(rows) + "</table>")


def _layer_table(report: dict[str, Any]) -> str:
    instructions = report.get("instructions_per_layer")
    total = sum(instructions) if instructions else 0
    head = ["#", "op", "source", "output", "MACs", "weights B", "arena slice", "kernel"]
    if instructions:
        head += ["instructions", "share"]
    rows = []
    for i, layer in enumerate(report["layers"]):
        arena = ("" if layer["arena_offset"] is None else
                 f'@{layer["arena_offset"]:,} +{layer["arena_bytes"]:,}')
        shape = "x".join(map(str, layer["shape"])) + " " + layer["dtype"]
        cells = [f'<td class="n">{layer["position"]}</td>', f"<td>{_e(layer['op'])}</td>",
                 f"<td>{_e(layer['source'])}</td>", f"<td>{_e(shape)}</td>",
                 f'<td class="n">{_num(layer["macs"])}</td>', f'<td class="n">{_num(layer["weights_bytes"])}</td>',
                 f"<td>{_e(arena)}</td>", f"<td>{_e(layer.get('kernel') or '')}</td>"]
        if instructions:
            cells += [f'<td class="n">{_num(instructions[i])}</td>',
                      f'<td class="n">{100 * instructions[i] / (total or 1):.1f}%</td>']
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"


def render_html(report: dict[str, Any]) -> str:
    """The report page. `report`: inspect_dict's output, with optional `target`, `rom`/`ram` ({bytes, parts}),
    `instructions_per_layer` (one count per layer) and `version`."""
    layers = report["layers"]
    labels = [_layer_label(layer) for layer in layers]
    target = report.get("target")
    sub = [f"{len(layers)} layers ({len(report['steps'])} primitive steps)"]
    if target:
        sub.append(f"target {target}")
    if report.get("version"):
        sub.append(f"qcodegen {report['version']}")
    body = [f"<h1>{_e(report['name'])}</h1><div class=\"sub\">{_e(' · '.join(sub))}</div>", _cards(report),
            "<h2>Inputs and outputs</h2>", _io_table(report),
            "<h2>Arena timeline</h2><figure>", arena_timeline_svg(report),
            f"<figcaption>Each box is a tensor in the {report['arena_bytes']:,}-byte arena: its lifetime (layers, "
            "execution order) across, its bytes up (a view -- a CONCAT input, a SLICE -- lies inside the tensor it "
            "views). The dashed lines are the live-set lower bound of the executed schedule, the most bytes live "
            "across one layer, and (with patch-based execution) the layer-wise bound, where every layer's whole "
            "input and output are live at once.</figcaption></figure>",
            "<h2>MACs per layer</h2><figure>", bars_svg(labels, [layer["macs"] for layer in layers], "MACs"),
            "</figure>"]
    if report.get("instructions_per_layer"):
        body += [f"<h2>Instructions per layer ({_e(target)})</h2><figure>",
                 bars_svg(labels, report["instructions_per_layer"], "instructions"), "</figure>"]
    body += ["<h2>Layers</h2>", _layer_table(report)]
    if report.get("notes"):
        body.append("<h2>Planner decisions</h2><ul class=\"note\">"
                    + "".join(f"<li>{_e(n)}</li>" for n in report["notes"]) + "</ul>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
            f"{_e(report['name'])} — qcodegen report</title><style>{_CSS}</style></head><body>"
            + "".join(body) + "</body></html>\n")


def render_csv(report: dict[str, Any]) -> str:
    """One row per layer (execution order)."""
    out = io.StringIO()
    fields = ["position", "op", "source", "output", "shape", "dtype", "macs", "weights_bytes", "arena_offset",
              "arena_bytes", "kernel"]
    instructions = report.get("instructions_per_layer")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields + (["instructions"] if instructions else []))
    for i, layer in enumerate(report["layers"]):
        row = [layer.get(f) if f != "shape" else "x".join(map(str, layer["shape"])) for f in fields]
        writer.writerow(["" if v is None else v for v in row] + ([instructions[i]] if instructions else []))
    return out.getvalue()
