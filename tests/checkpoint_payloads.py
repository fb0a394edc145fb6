"""Malicious checkpoints, assembled opcode by opcode into torch's zip container.

Each payload tries to create a marker file by a different route. The tests load
every file through mmfix (refused, no marker) and, as a control that the payload
is real, through stock ``torch.load(weights_only=False)`` in a throwaway process
(marker created). Nothing here runs a payload by itself.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import Callable

PROTO = b"\x80\x02"
STOP = b"."
REDUCE = b"R"
TUPLE1, TUPLE2, TUPLE3 = b"\x85", b"\x86", b"\x87"
MARK, TUPLE, EMPTY_TUPLE, EMPTY_DICT, SETITEM, BUILD, NEWOBJ = b"(", b"t", b")", b"}", b"s", b"b", b"\x81"


def g(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def s(text: str) -> bytes:
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def raw(data: bytes) -> bytes:
    return b"C" + bytes([len(data)]) + data if len(data) < 256 else b"B" + struct.pack("<I", len(data)) + data


def call(func: bytes, *args: bytes) -> bytes:
    return func + MARK + b"".join(args) + TUPLE + REDUCE


def getattr_(obj: bytes, name: str) -> bytes:
    return call(g("builtins", "getattr"), obj, s(name))


def dict1(key: str, value: bytes) -> bytes:
    return EMPTY_DICT + s(key) + value + SETITEM


def write_checkpoint(path: Path, body: bytes) -> Path:
    """A zip laid out as torch.save lays it out, holding ``body`` as the top-level object."""
    pkl = PROTO + dict1("state_dict", EMPTY_DICT) + s("payload") + body + SETITEM + STOP
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pkl)
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
        archive.writestr("archive/.data/serialization_id", "0" * 40)
    return path


def _code(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').close()"


def _history_buffer_with(state_value: bytes) -> bytes:
    hb = g("mmengine.logging.history_buffer", "HistoryBuffer")
    return hb + EMPTY_TUPLE + NEWOBJ + dict1("_log_history", state_value) + BUILD


def payloads(tmp: Path) -> dict[str, Callable[[Path], bytes]]:
    """name -> function(marker) -> pickle body."""

    def runpy_body(marker: Path) -> bytes:
        script = tmp / f"runpy_{marker.name}.py"
        script.write_text(_code(marker) + "\n")
        return call(g("runpy", "run_path"), s(str(script)))

    exec_via_getattr = lambda m: call(getattr_(getattr_(g("builtins", "getattr"), "__self__"), "exec"), s(_code(m)))
    globals_route = lambda m: call(
        call(
            getattr_(
                call(
                    getattr_(
                        getattr_(getattr_(g("mmengine.logging.history_buffer", "HistoryBuffer"), "min"), "__globals__"),
                        "get",
                    ),
                    s("__builtins__"),
                ),
                "get",
            ),
            s("exec"),
        ),
        s(_code(m)),
    )
    nested = b"\x80\x02" + call(g("posix", "system"), s("touch MARKER")) + STOP

    return {
        "os_system": lambda m: call(g("posix", "system"), s(f"touch {m}")),
        "subprocess_check_call": lambda m: call(g("subprocess", "check_call"), MARK + s("touch") + s(str(m)) + TUPLE),
        "builtins_eval": lambda m: call(g("builtins", "eval"), s(_code(m))),
        "builtins_exec": lambda m: call(g("builtins", "exec"), s(_code(m))),
        "runpy_run_path": runpy_body,
        "getattr_chain_to_builtins": exec_via_getattr,
        "functools_partial": lambda m: call(call(g("functools", "partial"), g("posix", "system"), s(f"touch {m}"))),
        "rebuild_from_type_v2_exec": lambda m: call(
            g("torch._tensor", "_rebuild_from_type_v2"),
            g("builtins", "exec"),
            g("builtins", "object"),
            MARK + s(_code(m)) + TUPLE,
            EMPTY_DICT,
        ),
        "rebuild_from_type_v2_getattr_chain": lambda m: call(
            g("torch._tensor", "_rebuild_from_type_v2"),
            getattr_(getattr_(g("builtins", "getattr"), "__self__"), "exec"),
            g("builtins", "object"),
            MARK + s(_code(m)) + TUPLE,
            EMPTY_DICT,
        ),
        "history_buffer_state_os_system": lambda m: _history_buffer_with(call(g("posix", "system"), s(f"touch {m}"))),
        "history_buffer_method_globals": lambda m: _history_buffer_with(globals_route(m)),
        "history_buffer_state_rebuild_getattr_chain": lambda m: _history_buffer_with(
            call(
                g("torch._tensor", "_rebuild_from_type_v2"),
                getattr_(getattr_(g("builtins", "getattr"), "__self__"), "exec"),
                g("builtins", "object"),
                MARK + s(_code(m)) + TUPLE,
                EMPTY_DICT,
            )
        ),
        "builtins_import_os": lambda m: call(
            getattr_(call(g("builtins", "__import__"), s("os")), "system"), s(f"touch {m}")
        ),
        "nested_pickle_loads": lambda m: call(
            g("pickle", "loads"),
            raw(
                nested.replace(b"MARKER", str(m).encode()).replace(
                    b"X\x0c\x00\x00\x00", b"X" + struct.pack("<I", len(f"touch {m}"))
                )
            ),
        ),
        "os_popen": lambda m: call(getattr_(call(g("os", "popen"), s(f"touch {m}")), "read")),
        "numpy_runstring": lambda m: call(g("numpy.testing._private.utils", "runstring"), s(_code(m)), EMPTY_DICT),
        "timeit_timeit": lambda m: call(
            g("timeit", "timeit"), s(_code(m)), s("pass"), g("time", "perf_counter"), b"K\x01"
        ),
    }


def build_corpus(tmp: Path) -> dict[str, tuple[Path, Path]]:
    """Write every payload; name -> (checkpoint path, marker path that must never appear)."""
    out = {}
    for name, body in payloads(tmp).items():
        marker = tmp / f"marker_{name}"
        out[name] = (write_checkpoint(tmp / f"{name}.pth", body(marker)), marker)
    return out


# ---------------------------------------------------------------------------
# Payloads that run no code by themselves but crash, hang, mislead or exhaust a
# loader (issue: crafted checkpoints). Each is a (kind, body) or a whole file.
# Stock torch refuses every one of them quickly (numpy and HistoryBuffer are not
# on its list); the danger is in what an allowlist or a replay makes of them.

BININT = b"J"
LONG_BINPUT = b"r"
APPENDS, EMPTY_LIST, LIST = b"e", b"]", b"l"


def i4(n: int) -> bytes:
    return BININT + struct.pack("<i", n)


def long_(n: int) -> bytes:
    data = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(data)]) + data


def tup(*items: bytes) -> bytes:
    return MARK + b"".join(items) + TUPLE


NONE, TRUE, FALSE = b"N", b"\x88", b"\x89"
NP = "numpy._core.multiarray"


def np_dtype(spec: str, state: bytes) -> bytes:
    return call(g("numpy", "dtype"), s(spec), FALSE, TRUE) + state + BUILD


def dtype_state(
    order: str = "<",
    sub: bytes = NONE,
    names: bytes = NONE,
    fields: bytes = NONE,
    elsize: int = -1,
    align: int = -1,
    flags: int = 0,
) -> bytes:
    return tup(i4(3), s(order), sub, names, fields, i4(elsize), i4(align), i4(flags))


def b_(data: bytes) -> bytes:
    return call(g("_codecs", "encode"), s(data.decode("latin-1")), s("latin1"))


def np_array(shape: tuple[int, ...], dtype: bytes, data: bytes, fortran: bytes = FALSE) -> bytes:
    rec = call(g(NP, "_reconstruct"), g("numpy", "ndarray"), tup(i4(0)), b_(b"b"))
    return rec + tup(i4(1), tup(*(long_(n) for n in shape)), dtype, fortran, b_(data)) + BUILD


F8 = np_dtype("f8", dtype_state())
OBJ_NO_FLAGS = np_dtype("O8", dtype_state(order="|", flags=0))  # an object dtype that claims no objects


def direct_ndarray(shape: int, dtype: bytes, buffer: bytes, strides: bytes = NONE) -> bytes:
    return call(g("numpy", "ndarray"), tup(long_(shape)), dtype, b_(buffer), i4(0), strides)


def _hb(state: bytes) -> bytes:
    return g("mmengine.logging.history_buffer", "HistoryBuffer") + EMPTY_TUPLE + NEWOBJ + state + BUILD


def _hb_state(methods: bytes) -> bytes:
    return (
        EMPTY_DICT
        + MARK
        + s("max_length")
        + i4(10)
        + s("_log_history")
        + np_array((1,), F8, b"\0" * 8)
        + s("_count_history")
        + np_array((1,), F8, b"\0" * 8)
        + s("statistics_methods")
        + methods
        + b"u"
    )


def _hb_getattr(name: str) -> bytes:
    return getattr_(g("mmengine.logging.history_buffer", "HistoryBuffer"), name)


def _dag_body(depth: int) -> bytes:
    """A tuple whose two items are the previous tuple: 2**depth paths, depth objects."""
    body = s("x") + b"q\x00" + b"0"
    for _ in range(depth):
        body += b"h\x00h\x00" + TUPLE2 + b"q\x00" + b"0"  # POP keeps the stack flat; memo 0 is the newest
    return body + b"h\x00"


REFUSED_FIRST = call(g("posix", "system"), s("true"))  # stock torch stops here at once

CLASSES = {
    "memory": "numpy dtype/array states that corrupt memory or misdescribe data",
    "hang": "numpy constructions that make a loader hang",
    "spelling": "hostile callables under innocent-looking names",
    "replay": "pickles that exhaust an unbounded replay",
    "zip": "zip directories that multiply work",
    "state": "loads that change class-level state",
    "verdict": "files whose globals are all allowed but whose values are refused",
}


def crafted_bodies(tmp: Path) -> dict[str, tuple[str, bytes]]:
    """name -> (class, pickle body). Every one must be refused cleanly, with no side effect;
    those that could act create ``tmp/marker_<name>`` if they ever run."""
    m = lambda name: s(str(tmp / f"marker_{name}"))
    t = lambda name: s(f"touch {tmp / f'marker_{name}'}")
    iterate = lambda arr: call(g("builtins", "set"), arr)
    return {
        # 1. memory corruption through numpy's dtype.__setstate__ (the critical finding) and its variants
        "object_dtype_flags_cleared_direct": ("memory", iterate(direct_ndarray(1, OBJ_NO_FLAGS, b"A" * 8))),
        "object_dtype_flags_cleared_reconstruct": ("memory", iterate(np_array((1,), OBJ_NO_FLAGS, b"A" * 8))),
        "object_dtype_scalar": ("memory", call(g(NP, "scalar"), OBJ_NO_FLAGS, b_(b"A" * 8))),
        "structured_dtype_with_object_field": (
            "memory",
            np_array(
                (1,),
                np_dtype(
                    "V8",
                    dtype_state(
                        order="|",
                        names=tup(s("a")),
                        fields=EMPTY_DICT + s("a") + tup(OBJ_NO_FLAGS, i4(0)) + SETITEM,
                        elsize=8,
                        align=1,
                        flags=0,
                    ),
                ),
                b"A" * 8,
            ),
        ),
        "subarray_dtype_of_objects": (
            "memory",
            np_array(
                (1,),
                np_dtype("V8", dtype_state(order="|", sub=tup(OBJ_NO_FLAGS, tup(i4(1))), elsize=8, align=1)),
                b"A" * 8,
            ),
        ),
        "float_dtype_with_huge_elsize": (
            "memory",
            np_array((1,), np_dtype("f8", dtype_state(elsize=1 << 30)), b"A" * 8),
        ),
        "float_dtype_with_fields": (
            "memory",
            np_array(
                (1,),
                np_dtype(
                    "f8", dtype_state(names=tup(s("a")), fields=EMPTY_DICT + s("a") + tup(F8, i4(4096)) + SETITEM)
                ),
                b"A" * 8,
            ),
        ),
        "float_dtype_with_object_flags": ("memory", np_array((1,), np_dtype("f8", dtype_state(flags=63)), b"A" * 8)),
        "str_dtype_elsize_zero": (
            "memory",
            np_array((4,), np_dtype("U1", dtype_state(elsize=0, align=4, flags=8)), b""),
        ),
        "datetime_dtype": (
            "memory",
            np_array(
                (1,),
                np_dtype(
                    "M8",
                    tup(
                        i4(4),
                        s("<"),
                        NONE,
                        NONE,
                        NONE,
                        i4(-1),
                        i4(-1),
                        i4(0),
                        tup(NONE, tup(b_(b"s"), i4(1), i4(1), i4(1))),
                    ),
                ),
                b"A" * 8,
            ),
        ),
        "array_object_dtype_list_data": (
            "memory",
            np_array((1,), np_dtype("O8", dtype_state(order="|", flags=63)), b""),
        ),
        "array_buffer_shorter_than_shape": ("memory", np_array((1 << 20,), F8, b"A" * 8)),
        "array_dtype_is_not_a_dtype": (
            "memory",
            call(g(NP, "_reconstruct"), g("numpy", "ndarray"), tup(i4(0)), b_(b"b"))
            + tup(i4(1), tup(i4(1)), i4(7), FALSE, b_(b"A"))
            + BUILD,
        ),
        "dtype_state_set_twice": (
            "memory",
            np_array((1,), np_dtype("f8", dtype_state()) + dtype_state(elsize=64) + BUILD, b"A" * 8),
        ),
        "scalar_wrong_length": ("memory", call(g(NP, "scalar"), F8, b_(b"A" * 3))),
        # 2. hangs
        "zero_stride_2_62_elements": (
            "hang",
            iterate(direct_ndarray(1 << 62, np_dtype("u1", dtype_state("|")), b"\0", tup(i4(0)))),
        ),
        "ndarray_via_newobj": (
            "hang",
            g("numpy", "ndarray")
            + tup(
                tup(long_(1 << 62)),
            )
            + NEWOBJ,
        ),
        "reconstruct_with_huge_shape": (
            "hang",
            call(g(NP, "_reconstruct"), g("numpy", "ndarray"), tup(long_(1 << 62)), b_(b"b")),
        ),
        "array_2_62_elements_empty_buffer": ("hang", iterate(np_array((1 << 62,), F8, b""))),
        # 3. trust by spelling (each also tried with MMFIX_TRUSTED_GLOBALS naming it)
        "spelled_torch_serialization_os_system": (
            "spelling",
            call(g("torch.serialization.os", "system"), t("spelled_torch_serialization_os_system")),
        ),
        "spelled_logger_os_system": (
            "spelling",
            call(g("mmengine.logging.logger.os", "system"), t("spelled_logger_os_system")),
        ),
        "pydoc_pipepager": ("spelling", call(g("pydoc", "pipepager"), s("x"), t("pydoc_pipepager"))),
        "posixsubprocess_fork_exec": (
            "spelling",
            call(g("_posixsubprocess", "fork_exec"), t("posixsubprocess_fork_exec")),
        ),
        "ctypes_dlopen": ("spelling", call(g("_ctypes", "dlopen"), s("libc.so.6"), i4(0))),
        "torch_hub_load": ("spelling", call(g("torch.hub", "load"), s("owner/repo"), s("model"))),
        "io_open_write": ("spelling", call(g("io", "open"), m("io_open_write"), s("w"))),
        "spelled_functools_partial_system": (
            "spelling",
            call(
                g("mmengine.utils.misc.functools", "partial"),
                g("posix", "system"),
                t("spelled_functools_partial_system"),
            ),
        ),
        # 4. replays that must stay bounded (a refused global first: stock stops there at once)
        "tuple_dag_dict_key": ("replay", REFUSED_FIRST + b"0" + EMPTY_DICT + _dag_body(60) + s("v") + SETITEM),
        "str_of_dag_in_persistent_id": ("replay", REFUSED_FIRST + b"0" + _dag_body(60) + b"Q"),
        "huge_memo_index": ("replay", REFUSED_FIRST + b"0" + s("x") + LONG_BINPUT + struct.pack("<I", 0xFFFFFFF0)),
        "deep_nesting": ("replay", REFUSED_FIRST + b"0" + EMPTY_LIST * 200_000 + b"a" * 199_999),
        "huge_string_length": ("replay", REFUSED_FIRST + b"0" + b"X" + struct.pack("<I", 0xFFFFFFF0) + b"abc" + STOP),
        "many_marks": ("replay", REFUSED_FIRST + b"0" + MARK * 300_000 + NONE),
        # 6. class-level state
        "history_buffer_mean_as_max": ("state", _hb(_hb_state(EMPTY_DICT + s("mean") + _hb_getattr("max") + SETITEM))),
        "history_buffer_statistic_not_callable": ("state", _hb(_hb_state(EMPTY_DICT + s("mean") + i4(42) + SETITEM))),
        "history_buffer_new_statistic": (
            "state",
            _hb(_hb_state(EMPTY_DICT + s("evil") + _hb_getattr("min") + SETITEM)),
        ),
        "history_buffer_called_with_args": (
            "state",
            call(g("mmengine.logging.history_buffer", "HistoryBuffer"), EMPTY_LIST, EMPTY_LIST, i4(5)),
        ),
        "history_buffer_state_twice": (
            "state",
            _hb(_hb_state(EMPTY_DICT)) + _hb_state(EMPTY_DICT + s("max") + _hb_getattr("min") + SETITEM) + BUILD,
        ),
        # 7. all globals allowed, values refused (inspect must not say "loads")
        "getattr_other_attribute": ("verdict", _hb_getattr("__init__")),
        "getattr_on_numpy": ("verdict", getattr_(g("numpy", "dtype"), "__setstate__")),
        **_review_bodies(tmp),
    }


# Found by a red-team review of the first version of the guards (each was a real finding).
BINPUT1 = lambda i: b"q" + bytes([i])
BINGET1 = lambda i: b"h" + bytes([i])
HB_GLOBAL = g("mmengine.logging.history_buffer", "HistoryBuffer")
#: payload name -> the global a user might be talked into trusting for it
TRUST_BAIT = {
    "trust_evaluator_builds_subprocess": "mmengine.evaluator.evaluator.Evaluator",
    "trust_mmlogger_writes_file": "mmengine.logging.logger.MMLogger",
    "trust_range_hangs": "builtins.range",
    "trust_bytes_64_gib": "builtins.bytes",
    "trust_fx_reduce_graph_module_execs": "torch.fx.graph_module.reduce_graph_module",
    "trust_codecs_open_writes_file": "codecs.open",
    # Classes that open or write files (or bind sockets) when constructed: no module list names
    # them (issue 19, item 5); their shape does (own __init__, C implementation).
    "trust_fortran_file_truncates": "scipy.io._fortran.FortranFile",
    "trust_netcdf_file_truncates": "scipy.io._netcdf.netcdf_file",
    "trust_wave_writer_truncates": "wave.Wave_write",
    "trust_mbox_creates_file": "mailbox.mbox",
    "trust_unix_server_binds": "socketserver.UnixStreamServer",
    "trust_video_writer_creates_file": "cv2.VideoWriter",
}
#: TRUST_BAIT entries whose class writes to a path the file names: name -> pickle body for a victim path
WRITERS = {
    "trust_fortran_file_truncates": lambda victim: call(g("scipy.io._fortran", "FortranFile"), s(victim), s("w")),
    "trust_netcdf_file_truncates": lambda victim: call(g("scipy.io._netcdf", "netcdf_file"), s(victim), s("w")),
    "trust_wave_writer_truncates": lambda victim: call(g("wave", "Wave_write"), s(victim)),
    "trust_mbox_creates_file": lambda victim: call(g("mailbox", "mbox"), s(victim)),
    "trust_unix_server_binds": lambda victim: call(
        g("socketserver", "UnixStreamServer"), s(victim), g("socketserver", "BaseRequestHandler")
    ),
    "trust_video_writer_creates_file": lambda victim: call(
        g("cv2", "VideoWriter"), s(victim), i4(0x47504A4D), i4(1), tup(i4(8), i4(8))
    ),
}


def _review_bodies(tmp: Path) -> dict[str, tuple[str, bytes]]:
    m = lambda name: str(tmp / f"marker_{name}")
    arr = np_array((2,), F8, b"\0" * 16)
    hb_quadratic = (
        REFUSED_FIRST
        + b"0"
        + HB_GLOBAL
        + EMPTY_TUPLE
        + NEWOBJ
        + EMPTY_DICT
        + s("statistics_methods")
        + EMPTY_DICT
        + s("k")
        + BINPUT1(1)
        + b"0"
        + MARK
        + (BINGET1(1) + NONE) * 50_000
        + b"u"
        + SETITEM
        + BINPUT1(2)
        + b"0"
        + (BINGET1(2) + BUILD) * 50_000
    )
    big = "A" * (1 << 20)
    return {
        "trust_evaluator_builds_subprocess": (
            "trust",
            call(
                g("mmengine.evaluator.evaluator", "Evaluator"),
                EMPTY_DICT
                + MARK
                + s("type")
                + s("subprocess.getoutput")
                + s("cmd")
                + s(f"touch {m('trust_evaluator_builds_subprocess')}")
                + b"u",
            ),
        ),
        "trust_mmlogger_writes_file": (
            "trust",
            call(
                g("mmengine.logging.logger", "MMLogger"),
                s("rt"),
                s("rt"),
                s(m("trust_mmlogger_writes_file")),
                s("INFO"),
                s("w"),
            ),
        ),
        "trust_range_hangs": ("trust", call(g("builtins", "set"), call(g("builtins", "range"), long_(1 << 62)))),
        "trust_bytes_64_gib": ("trust", call(g("builtins", "bytes"), long_(1 << 36))),
        "trust_fx_reduce_graph_module_execs": (
            "trust",
            call(
                g("torch.fx.graph_module", "reduce_graph_module"),
                EMPTY_DICT + s("_code") + s("def forward(self):\n    pass\n") + SETITEM,
                s(f"import os; os.system('touch {m('trust_fx_reduce_graph_module_execs')}')\n"),
            ),
        ),
        "trust_codecs_open_writes_file": (
            "trust",
            call(g("codecs", "open"), s(m("trust_codecs_open_writes_file")), s("w")),
        ),
        "cyclic_tuple_with_array": (
            "cyclic",
            MARK
            + EMPTY_LIST
            + BINPUT1(0)
            + arr
            + TUPLE2
            + BINPUT1(1)
            + BINGET1(0)
            + BINGET1(1)
            + b"a"
            + BINGET1(0)
            + BINGET1(1)
            + TUPLE2
            + TUPLE,
        ),
        "leak_tensor_attr": (
            "leak",
            call(
                g("torch._tensor", "_rebuild_from_type_v2"),
                g("torch", "Tensor"),
                g("torch", "Tensor"),
                EMPTY_TUPLE,
                EMPTY_DICT + s("leak") + arr + SETITEM,
            ),
        ),
        "leak_ordereddict_attrs": (
            "leak",
            call(g("collections", "OrderedDict"), EMPTY_TUPLE) + EMPTY_DICT + s("leak") + arr + SETITEM + BUILD,
        ),
        "leak_history_buffer_extra_key": (
            "leak",
            HB_GLOBAL + EMPTY_TUPLE + NEWOBJ + EMPTY_DICT + s("leak") + arr + SETITEM + BUILD,
        ),
        "leak_history_buffer_nested": (
            "leak",
            HB_GLOBAL
            + EMPTY_TUPLE
            + NEWOBJ
            + EMPTY_DICT
            + s("_log_history")
            + EMPTY_LIST
            + arr
            + b"a"
            + SETITEM
            + BUILD,
        ),
        "history_buffer_history_is_dtype": (
            "state",
            HB_GLOBAL + EMPTY_TUPLE + NEWOBJ + EMPTY_DICT + s("_log_history") + F8 + SETITEM + BUILD,
        ),
        "reader_history_buffer_build_quadratic": ("replay", hb_quadratic),
        "reader_codecs_encode_memory": (
            "replay",
            REFUSED_FIRST
            + b"0"
            + EMPTY_LIST
            + MARK
            + g("_codecs", "encode")
            + BINPUT1(1)
            + b"0"
            + s(big)
            + BINPUT1(2)
            + b"0"
            + s("latin1")
            + BINPUT1(3)
            + b"0"
            + (BINGET1(1) + BINGET1(2) + BINGET1(3) + TUPLE2 + REDUCE) * 3000
            + b"e",
        ),
        "reader_stack_global_hash": (
            "replay",
            REFUSED_FIRST
            + b"0"
            + s(big)
            + BINPUT1(1)
            + b"0"
            + (BINGET1(1) + BINGET1(1) + b"\x93" + b"0") * 3000
            + NONE,
        ),
        "verdict_build_on_dict": ("verdict", EMPTY_DICT + EMPTY_DICT + BUILD),
        "verdict_array_in_set": ("verdict", call(g("builtins", "set"), EMPTY_LIST + arr + b"a")),
        "verdict_dtype_newobj": ("verdict", g("numpy", "dtype") + tup(s("f8"), FALSE, TRUE) + NEWOBJ),
        "numpy_unicode_dtype_too_big": (
            "memory",
            np_array(
                (0,),
                np_dtype("U999999999", tup(i4(3), s("<"), NONE, NONE, NONE, long_(4 * 999999999), i4(4), i4(8))),
                b"",
            ),
        ),
        "numpy_shape_2_64": ("memory", np_array((0, 1 << 64), F8, b"")),
        "bytearray_64_gib": ("memory", call(g("builtins", "bytearray"), long_(1 << 36))),
        **{name: ("trust", writer(m(name))) for name, writer in WRITERS.items()},
        **_round2_bodies(),
    }


def _round2_bodies() -> dict[str, tuple[str, bytes]]:
    """Issue 19: mmfix's stand-ins escaping a load (item 6), values the loader refuses that
    inspect called loadable (item 7)."""
    arr = np_array((2,), F8, b"\0" * 16)
    return {
        "escape_history_buffer_without_state": ("escape", HB_GLOBAL + EMPTY_TUPLE + NEWOBJ),
        "escape_history_buffer_without_state_nested": (
            "escape",
            EMPTY_DICT
            + s("log_scalars")
            + EMPTY_DICT
            + s("loss")
            + HB_GLOBAL
            + EMPTY_TUPLE
            + NEWOBJ
            + SETITEM
            + SETITEM,
        ),
        "escape_history_buffer_class_as_value": ("escape", HB_GLOBAL),
        "escape_numpy_dtype_as_value": ("escape", EMPTY_LIST + g("numpy", "dtype") + b"a"),
        "escape_ndarray_name_in_tuple": ("escape", tup(g("numpy", "ndarray"), arr)),
        "escape_getattr_as_dict_key": ("escape", EMPTY_DICT + g("builtins", "getattr") + s("v") + SETITEM),
        "escape_reconstruct_in_ordereddict_state": (
            "escape",
            call(g("collections", "OrderedDict"), EMPTY_TUPLE)
            + EMPTY_DICT
            + s("x")
            + g(NP, "_reconstruct")
            + SETITEM
            + BUILD,
        ),
        "verdict_dtype_string_trailing_newline": (
            "verdict",
            np_array((1,), np_dtype("S8\n", dtype_state(order="|", elsize=8, align=1)), b"A" * 8),
        ),
        "verdict_array_dtype_never_built": (
            "verdict",
            np_array((1,), call(g("numpy", "dtype"), s("f8"), FALSE, TRUE), b"A" * 8),
        ),
        "verdict_scalar_dtype_never_built": (
            "verdict",
            call(g(NP, "scalar"), call(g("numpy", "dtype"), s("f8"), FALSE, TRUE), b_(b"A" * 8)),
        ),
    }


def write_zip_bombs(tmp: Path) -> dict[str, Path]:
    """Zip directories that multiply work: damage to report quickly, never inflate."""
    import zlib

    out = {}
    pkl = PROTO + EMPTY_DICT + s("x") + REFUSED_FIRST + SETITEM + STOP  # a refusal walks the refusal path
    blob = zlib.compress(b"\0" * (16 << 20), 9)[2:-4]  # raw deflate: 16 MiB from ~16 KiB
    crc = zlib.crc32(b"\0" * (16 << 20))

    def local(name: str, data: bytes, method: int, size: int, crc_: int) -> bytes:
        return (
            struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc_, len(data), size, len(name), 0)
            + name.encode()
            + data
        )

    def central(name: str, offset: int, csize: int, method: int, size: int, crc_: int) -> bytes:
        return (
            struct.pack(
                "<4s6H3L5H2L",
                b"PK\x01\x02",
                20,
                20,
                0,
                method,
                0,
                0,
                crc_,
                csize,
                size,
                len(name),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + name.encode()
        )

    def archive(entries: list[tuple[str, int, int, int, int, int]], body: bytes) -> bytes:
        cd = b"".join(central(*e) for e in entries)
        eocd = struct.pack(
            "<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries) & 0xFFFF, len(entries) & 0xFFFF, len(cd), len(body), 0
        )
        return body + cd + eocd

    body = b""
    small = []
    for name, data in (("archive/data.pkl", pkl), ("archive/version", b"3\n"), ("archive/byteorder", b"little")):
        small.append((name, len(body), len(data), 0, len(data), zlib.crc32(data)))
        body += local(name, data, 0, len(data), zlib.crc32(data))
    pkl_local = body  # everything before the compressed record
    body += local("archive/data/0", blob, 8, 16 << 20, crc)
    pkl_entry = small[0]
    # One compressed record listed 20,000 times under different names (testzip inflates each).
    many = small + [(f"archive/data/{i}", len(pkl_local), len(blob), 8, 16 << 20, crc) for i in range(20_000)]
    (tmp / "zip_record_listed_20000_times.pth").write_bytes(archive(many, body))
    out["zip_record_listed_20000_times"] = tmp / "zip_record_listed_20000_times.pth"
    dup = small + [pkl_entry, ("archive/data/0", len(pkl_local), len(blob), 8, 16 << 20, crc)]
    (tmp / "zip_duplicate_names.pth").write_bytes(archive(dup, body))
    out["zip_duplicate_names"] = tmp / "zip_duplicate_names.pth"
    # One record claiming 3 GiB of inflated data (its CRC would need all of it).
    big = small + [("archive/data/0", len(pkl_local), len(blob), 8, 3 << 30, crc)]
    (tmp / "zip_record_claims_3_gib.pth").write_bytes(archive(big, body))
    out["zip_record_claims_3_gib"] = tmp / "zip_record_claims_3_gib.pth"
    return out


def write_review_files(tmp: Path) -> dict[str, Path]:
    import pickle as _pickle

    legacy = tmp / "legacy_long_line.pth"
    legacy.write_bytes(
        b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."
        + _pickle.dumps(1001, protocol=2)
        + _pickle.dumps(
            {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 8}},
            protocol=2,
        )
        + b"\x80\x02I"
        + b"1" * (8 << 20)
    )
    encrypted = write_checkpoint(tmp / "zip_encrypted_flag.pth", EMPTY_DICT)
    data = bytearray(encrypted.read_bytes())
    data[data.find(b"PK\x01\x02") + 8] |= 1
    data[data.find(b"PK\x03\x04") + 6] |= 1
    encrypted.write_bytes(bytes(data))
    return {"legacy_long_line": legacy, "zip_encrypted_flag": encrypted}


def build_crafted(tmp: Path) -> dict[str, tuple[str, Path]]:
    """Every crafted file: name -> (class, path)."""
    out = {
        name: (kind, write_checkpoint(tmp / f"{name}.pth", body)) for name, (kind, body) in crafted_bodies(tmp).items()
    }
    out.update({name: ("zip", path) for name, path in write_zip_bombs(tmp).items()})
    out.update({name: ("zip" if "zip" in name else "replay", path) for name, path in write_review_files(tmp).items()})
    return out
