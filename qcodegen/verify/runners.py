"""Runners execute a generated model on inputs. `host` loads it in-process through cffi; `harness` builds
the command-line harness and runs it: natively, under a QEMU user-mode emulator (the target's `emulator`
prefix), or on an emulated bare-metal board (`semihosting = true`: qemu-system with the command line and the
files passed through semihosting).

Measurements (docs/targets.md): with `measure=True` a harness runner counts, on its first run, the instructions
of one inference -- every instruction executed from the entry of `<name>_run` to its return, callees
included -- with a QEMU TCG plugin (runtime/qemu/qc_insncount.c, built with the host compiler). The window
opens at the first instruction of `<name>_run` and closes at the return site after the call in main(), both
found by disassembling main(). On a core with a timing model (qcodegen/verify/timing: Cortex-M4, M7, M55) the
plugin also estimates the cycles of the same window (`cycles_estimate`, labelled with `timing_model`).
`text_bytes` / `rodata_bytes` are the `.text*` / `.rodata*` sections of the generated model.c and
model_weights.c compiled with the target's flags, and of the runtime kernel objects the sections that the model's
code reaches (harness, C library and compiler runtime helpers excluded)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import cffi
import numpy as np

from ..codegen.render import GeneratedModel
from ..codegen.targets import Target
from ..errors import BuildError
from ..kernels import pack4
from ..resources import data_path
from .build import cache_dir, compile_cached
from .timing import cost_table, timing_model

Trace = dict[int, list[bytes]]
Frames = list[list[np.ndarray]]  # one list of inputs (or outputs) per invocation


def _empty_outputs(model: GeneratedModel) -> list[np.ndarray]:
    return [np.zeros(b.shape, b.dtype.numpy) for b in model.outputs]


def _aligned(nbytes: int) -> np.ndarray:
    """A zeroed byte buffer whose data starts on a 16-byte boundary."""
    raw = np.zeros(max(nbytes, 1) + 16, np.uint8)
    offset = (-raw.ctypes.data) % 16
    return raw[offset:offset + max(nbytes, 1)]


class HostRunner:
    """Builds a shared library and calls <name>_run through cffi (ABI mode)."""

    def __init__(self, target: Target, extra_cflags: tuple[str, ...] = ()) -> None:
        self.target = target
        self.extra_cflags = extra_cflags
        self.loaded: dict[tuple[Path, str], tuple[cffi.FFI, object]] = {}  # by library and declarations

    def _library(self, model: GeneratedModel, trace: bool) -> tuple[cffi.FFI, object]:
        sources = list(model.sources)
        cdef = model.cdef()
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
        if (lib_path, cdef) not in self.loaded:  # a sequence calls it once per invocation: load it once
            ffi = cffi.FFI()
            ffi.cdef(cdef)
            self.loaded[lib_path, cdef] = ffi, ffi.dlopen(str(lib_path))
        return self.loaded[lib_path, cdef]

    def new_state(self, model: GeneratedModel) -> np.ndarray:
        """A state struct (bytes) of a streaming model, put in its initial state by <name>_init."""
        assert model.state is not None
        state = _aligned(model.state.size)
        ffi, lib = self._library(model, False)
        getattr(lib, f"{model.name}_init")(ffi.cast("void *", state.ctypes.data))
        return state

    def run_sequence(self, model: GeneratedModel, frames: Frames, repeat: int = 1) -> tuple[Frames, np.ndarray | None]:
        """Run the frames in order on one state (from the initial state), the whole sequence `repeat` times; the
        outputs per frame of the last pass and the final state's bytes (None for a stateless model)."""
        state = self.new_state(model) if model.state is not None else None
        for _ in range(repeat):
            outputs = [self.run(model, frame, state=state)[0] for frame in frames]
        return outputs, state

    def run(self, model: GeneratedModel, inputs: list[np.ndarray], trace: bool = False,
            state: np.ndarray | None = None) -> tuple[list[np.ndarray], Trace | None]:
        """One invocation; a streaming model runs on `state` (updated in place; default: a new initial state)."""
        ffi, lib = self._library(model, trace)
        outputs = _empty_outputs(model)
        arena = _aligned(model.arena_size)
        arena_ptr = ffi.cast("void *", arena.ctypes.data)
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
        if model.state is not None:
            state = self.new_state(model) if state is None else state
            args.append(ffi.cast("void *", state.ctypes.data))
        rc = getattr(lib, f"{model.name}_run")(*args, arena_ptr)
        if rc != 0:
            raise BuildError(f"{model.name}_run returned {rc}")
        return outputs, (steps if trace else None)

    def measurements(self, model: GeneratedModel) -> dict[str, int | str]:
        """Nothing is measured in-process."""
        return {}


def _raw(arr: np.ndarray, packed: bool) -> bytes:
    return (pack4(arr) if packed else np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"))).tobytes()


def write_raw(path: Path, arr: np.ndarray, packed: bool) -> None:
    path.write_bytes(_raw(arr, packed))


def _unpack4(raw: bytes, size: int, dtype: np.dtype) -> np.ndarray:
    nib = np.frombuffer(raw, np.uint8)
    vals = np.stack([nib & 0xF, nib >> 4], axis=1).reshape(-1)[:size].astype(np.int16)
    if np.dtype(dtype).kind == "i":
        vals = np.where(vals >= 8, vals - 16, vals)
    return vals.astype(dtype)


def read_raw(path: Path, shape: tuple[int, ...], dtype: np.dtype, packed: bool, per_frame: int | None = None
             ) -> np.ndarray:
    """A raw file as an array of `shape`; packed 4-bit data is read in frames of `per_frame` elements (each
    frame starts on a byte), the whole file as one frame by default."""
    raw = path.read_bytes()
    size = int(np.prod(shape, dtype=np.int64))
    if packed:
        frame = per_frame or size
        step = (frame + 1) // 2
        parts = [_unpack4(raw[k:k + step], frame, dtype) for k in range(0, step * (size // max(frame, 1)), step)]
        return np.concatenate(parts).reshape(shape) if parts else np.zeros(shape, dtype)
    return np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(shape)


def binutil(target: Target, tool: str) -> str:
    """The binutils program `tool` (size, objdump) that goes with the target's compiler: the TOML's `binutils`
    prefix, or its pattern with `{tool}` ("llvm-{tool}-14"), else the compiler's prefix."""
    prefix = target.extra.get("binutils")
    if prefix is None:
        cc = Path(target.cc.split()[0]).name
        prefix = cc[: -len("gcc")] if cc.endswith("-gcc") else ""
    return prefix.format(tool=tool) if "{tool}" in prefix else prefix + tool


@cache
def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    return frozenset(w for line in text.splitlines() if line.startswith("flags") for w in line.split()[2:])


def unavailable(target: Target) -> str | None:
    """Why this machine cannot build and run the target's harness (None: it can)."""
    missing = target.missing_tools()
    if missing:
        return f"missing {', '.join(missing)}"
    lacking = [f for f in target.extra.get("requires_cpu", ()) if f not in _cpu_flags()]
    if lacking:
        return f"this CPU lacks {', '.join(lacking)}"
    return None


def _counter(target: Target) -> list[str]:
    """The QEMU command prefix that runs the harness with the counting plugin ([] if the target has none)."""
    counter = list(target.extra.get("counter", target.emulator))
    return counter if counter and Path(counter[0]).name.startswith("qemu-") else []


def cannot_count(target: Target) -> str | None:
    """Why instructions cannot be counted for the target here (None: they can)."""
    counter = _counter(target)
    if not counter:
        return target.extra.get("no_counter", "no QEMU emulator for the target")
    missing = [t for t in (counter[0], binutil(target, "objdump")) if shutil.which(t) is None]
    return f"missing {', '.join(missing)}" if missing else None


def insncount_plugin() -> Path:
    """The instruction-counting QEMU plugin, built (once, cached) with the host C compiler."""
    source = data_path("runtime") / "qemu" / "qc_insncount.c"
    return compile_cached([source], ["cc", "-std=c99", "-O2", "-shared", "-fPIC", "-fvisibility=hidden"], ".so")


_INSN = re.compile(r"^\s*([0-9a-f]+):\s*(.*)$")
_PACKET_END = re.compile(r"\}\s*(:endloop\d+)?\s*$")  # llvm-objdump's Hexagon packets: "{ ... }  :endloop0"
_NAMED_TARGET = re.compile(r"\b([0-9a-f]+) <([^>+]+)>")  # GNU objdump: "bl 10074 <kws_like_run>", no "+0x10"
_CALL_ADDRESS = re.compile(r"\bcall 0x([0-9a-f]+)\b")   # llvm-objdump on Hexagon


def _symbols(objdump: str, exe: Path) -> dict[int, str]:
    """Address -> name of the executable's functions, from its symbol table."""
    proc = subprocess.run([objdump, "-t", str(exe)], capture_output=True, text=True)
    found = {}
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and " F " in line:
            found[int(fields[0], 16)] = fields[-1]
    return found


def direct_calls(objdump: str, exe: Path, function: str) -> list[tuple[str, int, int]]:
    """(callee, callee address, return site) of each direct call in `function`, from the disassembly. On a VLIW
    target (Hexagon: `{ ... }` packets) a call returns to the packet after the one holding it. A named operand
    (`bl 10074 <f>`) counts when it names a function (not a literal's data symbol); llvm-objdump takes another
    option and does not name call targets on every ISA: there `call 0xADDR` is named from the symbol table."""
    llvm = "llvm-objdump" in Path(objdump).name
    only = f"--disassemble-symbols={function}" if llvm else f"--disassemble={function}"
    proc = subprocess.run([objdump, "-d", "--no-show-raw-insn", only, str(exe)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{objdump} failed on {exe}: {proc.stderr.strip()[:300]}")
    insns = [m.groups() for m in map(_INSN.match, proc.stdout.splitlines()) if m]
    symbols = _symbols(objdump, exe)
    functions = set(symbols.values())
    calls, pending = [], []
    in_packet = False
    for (_, text), following in zip(insns, insns[1:], strict=False):
        in_packet = in_packet or text.startswith("{")
        named = _NAMED_TARGET.search(text)
        by_address = _CALL_ADDRESS.search(text) if llvm else None
        if named and named.group(2) in functions:
            pending.append((named.group(2), int(named.group(1), 16)))
        elif by_address and int(by_address.group(1), 16) in symbols:
            pending.append((symbols[int(by_address.group(1), 16)], int(by_address.group(1), 16)))
        in_packet = in_packet and not _PACKET_END.search(text)
        if not in_packet:
            calls += [(name, address, int(following[0], 16)) for name, address in pending]
            pending = []
    return calls


def call_window(objdump: str, exe: Path, symbol: str) -> tuple[int, list[int]]:
    """Entry address of `symbol` and the return sites of its calls in main(), from the disassembly."""
    found = [(address, site) for name, address, site in direct_calls(objdump, exe, "main") if name == symbol]
    if not found:
        raise BuildError(f"no call to {symbol} in main() of {exe}")
    return found[0][0], [site for _, site in found]


@dataclass(frozen=True)
class Count:
    """What the counting plugin measured, per window (one call of the counted function)."""
    instructions: int
    cycles: int | None              # estimated (None: the target's core has no timing model)
    timing_model: str | None
    marks: dict[int, tuple[int, int | None]]  # segment mark address -> (instructions, cycles), all windows
    packets: int | None = None      # Hexagon: the packets the instructions were executed in (QEMU's unit there)


def counting_prefix(target: Target, exe: Path, symbol: str, result: Path, marks: tuple[int, ...] = ()
                    ) -> list[str]:
    """The QEMU command prefix that runs `exe` counting the calls of `symbol` from main() (and estimating their
    cycles where the core has a timing model), the plugin writing to `result` (read it with read_count)."""
    objdump = binutil(target, "objdump")
    entry, stops = call_window(objdump, exe, symbol)
    options = [f"entry={entry:#x}"] + [f"stop={s:#x}" for s in stops] + [f"mark={a:#x}" for a in marks]
    core = timing_model(target)
    if core is not None:
        options.append(f"timing={cost_table(core, objdump, exe, entry)}")
    if "packets" in target.extra:  # QEMU's instructions are packets: count the instructions in them
        options.append(f"packets={target.extra['packets']}")
    return _counter(target) + ["-plugin", ",".join([str(insncount_plugin())] + options + [f"out={result}"])]


def read_count(target: Target, path: Path) -> Count:
    """The plugin's result file (see counting_prefix), per window."""
    if not path.exists():
        raise BuildError("the instruction-counting plugin wrote no result")
    fields, marks = {}, {}
    for line in path.read_text().splitlines():
        words = line.split()
        if words[0] == "mark":  # mark ADDR insns N hits H cycles K
            marks[int(words[1], 16)] = (int(words[3]), int(words[7]))
        else:
            fields[words[0]] = int(words[1])
    calls = fields["calls"]
    if calls < 1:
        raise BuildError("the counted function was never left through its return site")
    if fields.get("untimed"):
        raise BuildError(f"{fields['untimed']} executed instructions are missing from the timing table "
                         "(not in the disassembly of the executable)")
    core = timing_model(target)
    cycles = fields["cycles"] // calls if "cycles" in fields else None
    packets = fields["packets"] // calls if "packets" in fields else None
    return Count(fields["insns"] // calls, cycles, core.label if core and cycles is not None else None,
                 {a: (n, c if "cycles" in fields else None) for a, (n, c) in marks.items()}, packets)


def kernel_objects(target: Target, model: GeneratedModel, extra_cflags: tuple[str, ...] = ()) -> list[Path]:
    """The model's runtime kernel files compiled to objects, cached by their own content (the same objects for
    every model of the target that uses them)."""
    headers = [model.outdir / h for h in (model.plan.headers if model.plan else ())]
    return [compile_cached([src], [target.cc, *target.cflags, *extra_cflags, "-c"], ".o", headers=headers)
            for src in model.kernel_sources]


def _sections(size: str, obj: Path) -> dict[str, int]:
    proc = subprocess.run([size, "-A", str(obj)], capture_output=True, text=True, check=True)
    found: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            found[parts[0]] = found.get(parts[0], 0) + int(parts[1])
    return found


_REMOVED = re.compile(r"removing unused section '([^']+)' in file '([^']+)'")


def _unused_sections(target: Target, model: GeneratedModel, objects: list[Path],
                     extra_cflags: tuple[str, ...]) -> set[tuple[str, str]]:
    """(section, object) of the sections a link of the objects from `<name>_run` leaves out (--gc-sections; the
    C library's symbols left unresolved): the kernels the model does not call."""
    with tempfile.TemporaryDirectory(prefix="qc-size-") as tmp:
        cmd = [target.cc, *target.cflags, *extra_cflags, "-nostdlib", "-Wl,--gc-sections", "-Wl,--print-gc-sections",
               f"-Wl,--entry={model.name}_run", "-Wl,--unresolved-symbols=ignore-all", *map(str, objects),
               "-o", str(Path(tmp) / "model.elf")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"linking {model.name} for its code size failed: {proc.stderr.strip()[:300]}")
    return {(m.group(1), str(Path(m.group(2)).resolve())) for m in _REMOVED.finditer(proc.stderr)}


def code_size(target: Target, model: GeneratedModel, extra_cflags: tuple[str, ...] = ()) -> dict[str, int]:
    """text_bytes and rodata_bytes of the generated model: the model.c and model_weights.c objects, and of the
    runtime kernel objects the sections the model's code reaches (docs/targets.md "Measurements")."""
    size = binutil(target, "size")
    if shutil.which(size) is None:
        return {}
    own = [compile_cached([src], [target.cc, *target.cflags, *extra_cflags, "-c"], ".o")
           for src in model.own_sources]
    kernels = kernel_objects(target, model, extra_cflags)
    unused = _unused_sections(target, model, own + kernels, extra_cflags) if kernels else set()
    text = rodata = 0
    for obj in own + kernels:
        for name, nbytes in _sections(size, obj).items():
            if obj in kernels and (name, str(obj.resolve())) in unused:
                continue
            text += nbytes if name == ".text" or name.startswith(".text.") else 0
            rodata += nbytes if name.startswith((".rodata", ".srodata")) else 0
    return {"text_bytes": text, "rodata_bytes": rodata}


def content_addressed(path: Path) -> str:
    """A copy of `path` in the build cache, named by its content (so the cache key of a build that uses it
    changes with it)."""
    data = path.read_bytes()
    copy = cache_dir() / f"{hashlib.sha256(data).hexdigest()[:32]}-{path.name}"
    if not copy.exists():
        tmp = copy.with_name(f"{copy.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, copy)
    return str(copy)


class HarnessRunner:
    """Builds main.c + model into an executable and runs it with raw files (optionally under an emulator)."""

    timeout = 600  # seconds for one run

    def __init__(self, target: Target, extra_cflags: tuple[str, ...] = (), measure: bool = False) -> None:
        self.target = target
        self.extra_cflags = extra_cflags
        self.measure = measure
        self.counting = measure and cannot_count(target) is None
        self.counts: dict[Path, Count] = {}  # per executable: one inference, counted on its first run

    def executable(self, model: GeneratedModel) -> Path:
        main = model.outdir / "main.c"
        if not main.exists():
            raise BuildError(f"{model.outdir} has no main.c; generate with harness=True")
        extra = self.target.extra.get("harness_files", ())
        sources = [*model.own_sources, main] + [model.outdir / Path(f).name for f in extra if f.endswith(".c")]
        kernels = [str(o) for o in kernel_objects(self.target, model, self.extra_cflags)]
        # files named in the link flags (a linker script) are passed by content-addressed path
        linked = {f: content_addressed(model.outdir / f) for f in extra if not f.endswith((".c", ".h"))}
        return compile_cached(sources, [self.target.cc] + list(self.target.cflags) + list(self.extra_cflags),
                              ".exe", kernels + [linked.get(flag, flag) for flag in self.target.ldflags])

    def command(self, prefix: list[str], exe: Path, args: list[str]) -> list[str]:
        return prefix + [str(exe)] + args

    def run(self, model: GeneratedModel, inputs: list[np.ndarray], trace: bool = False,
            repeat: int = 1) -> tuple[list[np.ndarray], Trace | None]:
        """One invocation (a streaming model from its initial state), `repeat` times."""
        outputs, _ = self._invoke(model, [inputs], repeat)
        return outputs[0], None

    def run_sequence(self, model: GeneratedModel, frames: Frames, repeat: int = 1) -> tuple[Frames, np.ndarray | None]:
        """A streaming model's harness runs the frames in one process on one state (files of several frames;
        -n repeat: the sequence `repeat` times); the outputs per frame of the last pass and the final state's
        bytes. A stateless model runs once per frame."""
        if model.state is None:
            return [self.run(model, frame, repeat=repeat)[0] for frame in frames], None
        return self._invoke(model, frames, repeat)

    def _invoke(self, model: GeneratedModel, frames: Frames, repeat: int) -> tuple[Frames, np.ndarray | None]:
        exe = self.executable(model)
        with tempfile.TemporaryDirectory(prefix="qc-run-") as tmp:
            tmpdir = Path(tmp)
            in_files = []
            for i, buf in enumerate(model.inputs):
                path = tmpdir / f"in{i}.bin"
                packed = b"".join(_raw(frame[i].astype(buf.dtype.numpy), buf.dtype.is_packed) for frame in frames)
                path.write_bytes(packed)
                in_files.append(path)
            out_files = [tmpdir / f"out{i}.bin" for i in range(len(model.outputs))]
            state_file = tmpdir / "state.bin"
            args = (["-n", str(repeat)] if repeat != 1 else []) + (["-S", str(state_file)] if model.state else [])
            args += [str(p) for p in in_files + out_files]
            counting = self.counting and exe not in self.counts
            count_file = tmpdir / "insns.txt"
            prefix = (counting_prefix(self.target, exe, f"{model.name}_run", count_file) if counting
                      else list(self.target.emulator))
            try:
                proc = subprocess.run(self.command(prefix, exe, args), capture_output=True, text=True,
                                      stdin=subprocess.DEVNULL, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise BuildError(f"harness did not finish in {self.timeout} s") from None
            if proc.returncode != 0:
                raise BuildError(f"harness exited with {proc.returncode}: {proc.stderr.strip()[:500]}")
            if counting:
                self.counts[exe] = read_count(self.target, count_file)
            per_output = [read_raw(p, (len(frames), *b.shape), b.dtype.numpy, b.dtype.is_packed, per_frame=b.size)
                          for p, b in zip(out_files, model.outputs, strict=True)]
            state = np.frombuffer(state_file.read_bytes(), np.uint8).copy() if model.state else None
        return [[out[t] for out in per_output] for t in range(len(frames))], state

    def measurements(self, model: GeneratedModel) -> dict[str, int | str]:
        """instructions (when counted; on Hexagon also packets), the estimated cycles and the timing model that
        estimated them (where the core has one), and the code size of the generated model (when measuring)."""
        if not self.measure:
            return {}
        count = self.counts.get(self.executable(model))
        found: dict[str, int | str] = {}
        if count is not None:
            found["instructions"] = count.instructions
            if count.packets is not None:
                found["packets"] = count.packets
            if count.cycles is not None and count.timing_model is not None:
                found |= {"cycles_estimate": count.cycles, "timing_model": count.timing_model}
        return found | code_size(self.target, model, self.extra_cflags)


class SemihostingRunner(HarnessRunner):
    """A bare-metal harness on an emulated board: `qemu-system-* ... -kernel model`, with the command line
    (and through it the file names) passed by semihosting."""

    def command(self, prefix: list[str], exe: Path, args: list[str]) -> list[str]:
        argv = ",".join("arg=" + a.replace(",", ",,") for a in ["model", *args])
        return prefix + ["-kernel", str(exe), "-semihosting-config", f"enable=on,target=native,{argv}"]


def get_runner(target: Target, kind: str | None = None, extra_cflags: tuple[str, ...] = (),
               measure: bool = False) -> HostRunner | HarnessRunner:
    """The target's runner; `measure` makes a harness runner count instructions (where the target has a QEMU
    to count with) and report code size."""
    kind = kind or target.runner
    if kind == "host":
        return HostRunner(target, extra_cflags)
    if kind == "harness":
        cls = SemihostingRunner if target.extra.get("semihosting") else HarnessRunner
        return cls(target, extra_cflags, measure=measure)
    raise BuildError(f"target {target.name!r} has an unknown runner {kind!r}")
