"""The ``corevector`` command (``corevector --help``; ``python -m corevector.cli``).

Its parser and subcommands are :mod:`corevector.cli.command`, which starts at :func:`main`, their options
:mod:`corevector.cli.options`'; the data files it reads are :mod:`corevector.io.readers`'s, and the models it
writes and reads :mod:`corevector.io`'s.
"""
from .command import build_parser, main

__all__ = ["main", "build_parser"]
