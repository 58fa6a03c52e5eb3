"""Ctrl-C of a `study` command is one line and status 130 wherever it lands: inside an import
(delivered once the import is done), inside a library that swallows the KeyboardInterrupt (the
error that follows is the interrupt), and after the work is done (nothing left to stop).

Each case runs the real `study` entry point in its own process, with the command's function
replaced by one that sends SIGINT to its own process at the moment under test."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ARGS = '["prepare", "--dataset", "synthetic", "--variant", "default", "--out", "unused.pt"]'


def _run(tmp_path: Path, command_body: str, call: str = f"sys.exit(cli.main({ARGS}))") -> subprocess.CompletedProcess:
    script = textwrap.dedent("""\
        import os, signal, sys, threading, time
        import study.cli as cli
        from study.cli import data

        def command(args):
        {body}
        data.cmd_prepare = command  # the parser binds `func` when it is built, inside main
        {call}
        """).format(body=textwrap.indent(textwrap.dedent(command_body), "    "), call=call)
    (tmp_path / "script.py").write_text(script)
    return subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_an_interrupt_inside_an_import_lands_once_the_import_is_done(tmp_path):
    # the module's own code sends the interrupt, then finishes; the interrupt must wait for it
    (tmp_path / "slow_module.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(0.3)\nfinished = True\n")
    proc = _run(tmp_path, """\
        sys.path.insert(0, os.getcwd())
        try:
            import slow_module
            time.sleep(5)  # where the delivered interrupt lands
        except KeyboardInterrupt:
            print("module finished:", getattr(sys.modules.get("slow_module"), "finished", False))
            raise
        return 0
        """)
    assert proc.returncode == 130, proc.stderr
    assert proc.stdout.strip() == "module finished: True"
    assert proc.stderr.strip() == "study prepare: interrupted"


@pytest.mark.parametrize("then", [
    "raise AttributeError(\"module 'numpy' has no attribute 'subtract'\")",  # its next error
    "return 0",  # or a command that ends all the same
])
def test_an_interrupt_a_library_swallowed_is_still_the_interrupt(tmp_path, then):
    proc = _run(tmp_path, f"""\
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass  # what torch's C code does when numpy's import is interrupted
        {then}
        """)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "study prepare: interrupted"


def test_without_an_interrupt_an_unknown_error_keeps_its_traceback(tmp_path):
    # (the contrast: the rule above turns an error into "interrupted" only after an interrupt)
    proc = _run(tmp_path, """\
        raise AttributeError("a bug")
        """)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "AttributeError: a bug" in proc.stderr


def test_an_interrupt_after_the_work_is_done_ends_the_process_quietly(tmp_path):
    # main() without arguments is the process's command; the signal arrives while the interpreter
    # shuts down (it waits for this non-daemon thread)
    proc = _run(tmp_path, """\
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        print("done")
        return 0
        """, call=f"sys.argv[1:] = {ARGS}; sys.exit(cli.main())")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert proc.stderr == ""


def test_a_caller_that_passes_its_arguments_gets_its_own_interrupt_handler_back(tmp_path):
    # (a test or a script calling main(argv) in its process keeps its Ctrl-C)
    proc = _run(tmp_path, """\
        return 0
        """, call=f"status = cli.main({ARGS}); print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
