"""The console scripts: each replaces itself with the bundled program, so
arguments, exit status and signals are the program's own."""
import os
import sys

from . import bin_path


def _exec(name, interpreter=None):
    path = bin_path(name)
    # argv[0] as the user typed it: tutti-perf reads the collective from a
    # link's name (all_reduce_perf); the programs find their files through
    # /proc/self/exe, not argv[0].
    argv = [sys.argv[0] if sys.argv and sys.argv[0] else name] + sys.argv[1:]
    sys.stdout.flush()
    sys.stderr.flush()
    if interpreter is not None:
        os.execv(interpreter, [interpreter, path] + argv[1:])
    os.execv(path, argv)


def tuttirun():
    _exec("tuttirun")


def tutti_perf():
    _exec("tutti-perf")


def tutti_check():
    _exec("tutti-check")


def tutti_ras():
    _exec("tutti-ras")


def tutti_plot():
    # A Python script: run it with this interpreter rather than its #! line.
    _exec("tutti-plot", sys.executable)
