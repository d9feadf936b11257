"""ONNX convolution and pooling geometry: explicit pads from auto_pad / pads, output sizes (ONNX operator spec)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import shorten
from .onnx_import import Importer


@dataclass(frozen=True)
class Window2D:
    """A 2-D window over NCHW data: kernel, strides, dilations, pads [top, left, bottom, right], output size."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]
    out_hw: tuple[int, int]

    def attrs(self) -> dict[str, list[int]]:
        return dict(kernel=list(self.kernel), strides=list(self.strides), dilations=list(self.dilations),
                    pads=list(self.pads))


def window_2d(imp: Importer, in_hw: tuple[int, int], kernel: tuple[int, int], ceil_mode: bool = False,
              dilations_allowed: bool = True) -> Window2D:
    """The window of the current node from its auto_pad, pads, strides and dilations attributes."""
    strides = imp.ints_attr("strides", 2, 1)
    dilations = imp.ints_attr("dilations", 2, 1) if dilations_allowed else [1, 1]
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations) or any(k < 1 for k in kernel):
        raise imp.error(f"strides {strides}, dilations {dilations} and kernel {list(kernel)} must be >= 1")
    auto_pad = imp.attr("auto_pad", "NOTSET")
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-i // s) for i, s in zip(in_hw, strides, strict=True)]
        begin, end = [], []
        for i, s, e, o in zip(in_hw, strides, extents, out, strict=True):
            total = max(0, (o - 1) * s + e - i)
            small = total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        pads = [begin[0], begin[1], end[0], end[1]]
    elif auto_pad in ("NOTSET", "VALID"):
        onnx_pads = imp.ints_attr("pads", 4, 0) if auto_pad == "NOTSET" else [0, 0, 0, 0]
        if any(p < 0 for p in onnx_pads):
            raise imp.error(f"negative pads {onnx_pads}")
        pads = [onnx_pads[0], onnx_pads[1], onnx_pads[2], onnx_pads[3]]  # ONNX: [y_begin, x_begin, y_end, x_end]
        out = []
        for axis in range(2):
            span = in_hw[axis] + pads[axis] + pads[axis + 2] - extents[axis]
            if span < 0:
                raise imp.error(f"the window ({extents[axis]}) is larger than the padded input "
                                f"({in_hw[axis] + pads[axis] + pads[axis + 2]}) along spatial axis {axis}")
            if ceil_mode and span % strides[axis]:
                raise imp.unsupported("ceil_mode with a partial last window is not supported")
            out.append(span // strides[axis] + 1)
    else:
        raise imp.error(f"unknown auto_pad {shorten(auto_pad)}")
    if any(p >= e for p, e in zip(pads, extents + extents, strict=True)) and imp.node.op_type.endswith("Pool"):
        raise imp.unsupported(f"pads {pads} reach a whole window {extents}")
    return Window2D(tuple(kernel), tuple(strides), tuple(dilations), tuple(pads), tuple(out))
