"""A warm interpreter that runs ``python -c CODE`` requests, each in a fresh fork (issue 29).

A test that starts ``python -c`` to load one checkpoint pays 3-5 s of CPU for importing torch and
MMEngine before it does a millisecond of work; the checkpoint-security tests start about a hundred
such interpreters, in the main suite and in each of the version matrix's cells. This server
imports torch, numpy and MMEngine's loaders once — never mmfix, and nothing that depends on the
request — and then forks one child per request: the child takes the request's environment, working
folder and fresh standard streams, runs the code as ``python -c`` would (``__main__``, exit status,
traceback on stderr, atexit handlers) and ends with ``os._exit``. So each request still starts from
a process in which mmfix was never imported, and ``import mmfix`` in the code applies it then (on
already-imported torch and MMEngine, as ``import mmfix`` after ``import torch`` does in a training
script).

Protocol (the client is ``conftest.run_python(..., warm=True)``): on stdin, one request per line,
JSON ``{"code", "env", "cwd", "timeout"}``; on stdout, one JSON line per request: ``{"returncode",
"stdout", "stderr", "timed_out"}`` (``returncode`` negative for a signal, as subprocess says). A
request that outlives its timeout is killed with its whole process group.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

# What the security tests' loaders and controls import; importing any of it is independent of a
# request's environment (nothing here reads MMFIX_* settings).
PRELOAD = (
    "numpy",
    "torch",
    "torch.fx.graph_module",
    "mmengine.runner",
    "mmengine.logging",
    "mmengine.logging.logger",
    "mmengine.utils.misc",
    "mmengine.evaluator.evaluator",
    "pydoc",
    "codecs",
    "socketserver",
)


def _child(request: dict, out_path: str, err_path: str) -> None:
    os.setsid()  # its own process group: a timeout kills what it started too
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, out_path), (2, err_path)):
        target = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    # Only what the code registers runs at its exit (a fresh interpreter has no other handlers;
    # the server's own, such as its temporary folder's finalizer, are not the child's).
    atexit._clear()
    sys.argv = ["-c"]
    sys.path[0] = ""  # `python -c` puts the working folder first, where this server has its own folder
    status = 0
    try:
        exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as stop:
        if stop.code is None:
            status = 0
        elif isinstance(stop.code, int):
            status = stop.code
        else:
            print(stop.code, file=sys.stderr)
            status = 1
    except BaseException:
        # as the interpreter reports it: through sys.excepthook, which the code may have replaced
        # (mmfix's names a refused checkpoint in one paragraph)
        try:
            sys.excepthook(*sys.exc_info())
        except BaseException:
            traceback.print_exc()
        status = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(status)


def _serve(request: dict) -> dict:
    tmp = tempfile.mkdtemp(prefix="warm-python-")
    try:
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        for path in (out_path, err_path):
            open(path, "w").close()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _child(request, out_path, err_path)
            finally:
                os._exit(70)
        deadline = time.monotonic() + float(request["timeout"])
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.005)
        try:  # a grandchild left running past its parent's end is ended too, as a test expects
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        with open(out_path, errors="replace") as out, open(err_path, errors="replace") as err:
            stdout, stderr = out.read(), err.read()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return {"returncode": code, "stdout": stdout, "stderr": stderr, "timed_out": timed_out}


def main() -> None:
    for name in PRELOAD:
        __import__(name)
    assert "mmfix" not in sys.modules, "the warm interpreter must not have imported mmfix"
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(_serve(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
