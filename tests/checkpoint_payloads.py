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

    exec_via_getattr = lambda m: call(  # noqa: E731
        getattr_(getattr_(g("builtins", "getattr"), "__self__"), "exec"), s(_code(m)))
    globals_route = lambda m: call(  # noqa: E731
        call(getattr_(call(getattr_(getattr_(getattr_(g("mmengine.logging.history_buffer", "HistoryBuffer"), "min"),
                                             "__globals__"), "get"), s("__builtins__")), "get"), s("exec")),
        s(_code(m)))
    nested = b"\x80\x02" + call(g("posix", "system"), s("touch MARKER")) + STOP

    return {
        "os_system": lambda m: call(g("posix", "system"), s(f"touch {m}")),
        "subprocess_check_call": lambda m: call(g("subprocess", "check_call"),
                                                MARK + s("touch") + s(str(m)) + TUPLE),
        "builtins_eval": lambda m: call(g("builtins", "eval"), s(_code(m))),
        "builtins_exec": lambda m: call(g("builtins", "exec"), s(_code(m))),
        "runpy_run_path": runpy_body,
        "getattr_chain_to_builtins": exec_via_getattr,
        "functools_partial": lambda m: call(call(g("functools", "partial"), g("posix", "system"), s(f"touch {m}"))),
        "rebuild_from_type_v2_exec": lambda m: call(
            g("torch._tensor", "_rebuild_from_type_v2"), g("builtins", "exec"), g("builtins", "object"),
            MARK + s(_code(m)) + TUPLE, EMPTY_DICT),
        "rebuild_from_type_v2_getattr_chain": lambda m: call(
            g("torch._tensor", "_rebuild_from_type_v2"),
            getattr_(getattr_(g("builtins", "getattr"), "__self__"), "exec"), g("builtins", "object"),
            MARK + s(_code(m)) + TUPLE, EMPTY_DICT),
        "history_buffer_state_os_system": lambda m: _history_buffer_with(call(g("posix", "system"), s(f"touch {m}"))),
        "history_buffer_method_globals": lambda m: _history_buffer_with(globals_route(m)),
        "history_buffer_state_rebuild_getattr_chain": lambda m: _history_buffer_with(call(
            g("torch._tensor", "_rebuild_from_type_v2"),
            getattr_(getattr_(g("builtins", "getattr"), "__self__"), "exec"), g("builtins", "object"),
            MARK + s(_code(m)) + TUPLE, EMPTY_DICT)),
        "builtins_import_os": lambda m: call(getattr_(call(g("builtins", "__import__"), s("os")), "system"),
                                             s(f"touch {m}")),
        "nested_pickle_loads": lambda m: call(g("pickle", "loads"),
                                              raw(nested.replace(b"MARKER", str(m).encode())
                                                  .replace(b"X\x0c\x00\x00\x00", b"X" + struct.pack("<I", len(f"touch {m}"))))),
        "os_popen": lambda m: call(getattr_(call(g("os", "popen"), s(f"touch {m}")), "read")),
        "numpy_runstring": lambda m: call(g("numpy.testing._private.utils", "runstring"), s(_code(m)), EMPTY_DICT),
        "timeit_timeit": lambda m: call(g("timeit", "timeit"), s(_code(m)), s("pass"), g("time", "perf_counter"),
                                        b"K\x01"),
    }


def build_corpus(tmp: Path) -> dict[str, tuple[Path, Path]]:
    """Write every payload; name -> (checkpoint path, marker path that must never appear)."""
    out = {}
    for name, body in payloads(tmp).items():
        marker = tmp / f"marker_{name}"
        out[name] = (write_checkpoint(tmp / f"{name}.pth", body(marker)), marker)
    return out
