"""Runners execute a generated model on inputs. `host` loads it in-process through cffi; `harness` builds
the command-line harness and runs it (natively, or under an emulator given by the target)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import cffi
import numpy as np

from ..codegen.render import GeneratedModel, pack4
from ..codegen.targets import Target
from ..errors import BuildError
from .build import compile_cached

Trace = dict[int, list[bytes]]


def _empty_outputs(model: GeneratedModel) -> list[np.ndarray]:
    return [np.zeros(b.shape, b.dtype.numpy) for b in model.outputs]


class HostRunner:
    """Builds a shared library and calls <name>_run through cffi (ABI mode)."""

    def __init__(self, target: Target, extra_cflags: tuple[str, ...] = ()) -> None:
        self.target = target
        self.extra_cflags = extra_cflags

    def _library(self, model: GeneratedModel, trace: bool) -> tuple[cffi.FFI, object]:
        sources = [model.outdir / f"{model.name}.c", model.outdir / f"{model.name}_weights.c"]
        cdef = model.prototype()
        flags = list(self.target.cflags) + list(self.extra_cflags) + ["-shared", "-fPIC"]
        if trace:
            shim = model.outdir / "qc_trace_shim.c"
            shim.write_text(
                "#include <stddef.h>\n"
                "static void (*qc_cb)(int, const void *, size_t);\n"
                f"void {model.name}_set_trace(void (*cb)(int, const void *, size_t));\n"
                f"void {model.name}_trace(int step, const void *data, size_t n);\n"
                f"void {model.name}_set_trace(void (*cb)(int, const void *, size_t)) {{ qc_cb = cb; }}\n"
                f"void {model.name}_trace(int step, const void *data, size_t n) "
                "{ if (qc_cb) qc_cb(step, data, n); }\n")
            sources.append(shim)
            flags.append("-DQC_TRACE")
            cdef += f"\nvoid {model.name}_set_trace(void (*cb)(int, const void *, size_t));"
        lib_path = compile_cached(sources, [self.target.cc] + flags, ".so", list(self.target.ldflags))
        ffi = cffi.FFI()
        ffi.cdef(cdef)
        return ffi, ffi.dlopen(str(lib_path))

    def run(self, model: GeneratedModel, inputs: list[np.ndarray], trace: bool = False
            ) -> tuple[list[np.ndarray], Trace | None]:
        ffi, lib = self._library(model, trace)
        outputs = _empty_outputs(model)
        arena = np.zeros(max(model.arena_size, 1) + 16, np.uint8)
        offset = (-arena.ctypes.data) % 16
        arena_ptr = ffi.cast("void *", arena.ctypes.data + offset)
        steps: Trace = {}
        callback = None
        if trace:
            @ffi.callback("void(int, const void *, size_t)")
            def callback(step: int, data: object, nbytes: int) -> None:
                steps.setdefault(step, []).append(bytes(ffi.buffer(data, nbytes)))
            getattr(lib, f"{model.name}_set_trace")(callback)
        args = [ffi.from_buffer(f"{b.dtype.ctype}[]", np.ascontiguousarray(x, b.dtype.numpy))
                for b, x in zip(model.inputs, inputs, strict=True)]
        args += [ffi.from_buffer(f"{b.dtype.ctype}[]", y) for b, y in zip(model.outputs, outputs, strict=True)]
        rc = getattr(lib, f"{model.name}_run")(*args, arena_ptr)
        if rc != 0:
            raise BuildError(f"{model.name}_run returned {rc}")
        return outputs, (steps if trace else None)


def write_raw(path: Path, arr: np.ndarray, packed: bool) -> None:
    data = pack4(arr) if packed else np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"))
    path.write_bytes(data.tobytes())


def read_raw(path: Path, shape: tuple[int, ...], dtype: np.dtype, packed: bool) -> np.ndarray:
    raw = path.read_bytes()
    size = int(np.prod(shape, dtype=np.int64))
    if packed:
        nib = np.frombuffer(raw, np.uint8)
        vals = np.stack([nib & 0xF, nib >> 4], axis=1).reshape(-1)[:size].astype(np.int16)
        if np.dtype(dtype).kind == "i":
            vals = np.where(vals >= 8, vals - 16, vals)
        return vals.astype(dtype).reshape(shape)
    return np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(shape)


class HarnessRunner:
    """Builds main.c + model into an executable and runs it with raw files (optionally under an emulator)."""

    def __init__(self, target: Target, extra_cflags: tuple[str, ...] = ()) -> None:
        self.target = target
        self.extra_cflags = extra_cflags

    def executable(self, model: GeneratedModel) -> Path:
        main = model.outdir / "main.c"
        if not main.exists():
            raise BuildError(f"{model.outdir} has no main.c; generate with harness=True")
        sources = [model.outdir / f"{model.name}.c", model.outdir / f"{model.name}_weights.c", main]
        return compile_cached(sources, [self.target.cc] + list(self.target.cflags) + list(self.extra_cflags),
                              ".exe", list(self.target.ldflags))

    def run(self, model: GeneratedModel, inputs: list[np.ndarray], trace: bool = False,
            repeat: int = 1) -> tuple[list[np.ndarray], Trace | None]:
        exe = self.executable(model)
        with tempfile.TemporaryDirectory(prefix="qc-run-") as tmp:
            tmpdir = Path(tmp)
            in_files, out_files = [], []
            for i, (buf, arr) in enumerate(zip(model.inputs, inputs, strict=True)):
                path = tmpdir / f"in{i}.bin"
                write_raw(path, arr.astype(buf.dtype.numpy), buf.dtype.is_packed)
                in_files.append(path)
            out_files = [tmpdir / f"out{i}.bin" for i in range(len(model.outputs))]
            cmd = list(self.target.emulator) + [str(exe)]
            if repeat != 1:
                cmd += ["-n", str(repeat)]
            cmd += [str(p) for p in in_files + out_files]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise BuildError(f"harness exited with {proc.returncode}: {proc.stderr.strip()[:500]}")
            outputs = [read_raw(p, b.shape, b.dtype.numpy, b.dtype.is_packed)
                       for p, b in zip(out_files, model.outputs, strict=True)]
        return outputs, None


def get_runner(target: Target, kind: str | None = None, extra_cflags: tuple[str, ...] = ()
               ) -> HostRunner | HarnessRunner:
    kind = kind or target.runner
    if kind == "host":
        return HostRunner(target, extra_cflags)
    if kind == "harness":
        return HarnessRunner(target, extra_cflags)
    raise BuildError(f"target {target.name!r} has an unknown runner {kind!r}")
