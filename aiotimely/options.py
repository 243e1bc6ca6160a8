"""The command line of a program run by aiotimely: its options (``-w -n -p --hostfile --metrics-port --ui
--tls-*``), read by :func:`parse_args` and turned into :func:`~aiotimely.execute`'s keyword arguments by
:func:`execute_options`; ``aiotimely run`` (:mod:`aiotimely.cli`) declares the same with :func:`add_options`."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any, NoReturn, Sequence

from .comm.tls import ENV_CA, ENV_CERT, ENV_KEY

__all__ = ["OptionParser", "add_options", "parse_args", "execute_options"]


class OptionParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: what is wrong, and where to look."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} -h)\n")


def add_options(parser: argparse.ArgumentParser | Any, *, launcher: bool = False) -> None:
    """Add aiotimely's options to ``parser`` (or an argument group): ``-w -n`` and, unless for the ``aiotimely run``
    ``launcher``, ``-p --hostfile``; ``--metrics-port --ui``; ``--tls-cert --tls-key --tls-ca``."""
    parser.add_argument("-w", "--workers", type=int, default=1, metavar="N", help="workers per process (default 1)")
    parser.add_argument("-n", "--processes", type=int, default=1, metavar="N",
                        help="number of processes (default 1)")
    if not launcher:
        parser.add_argument("-p", "--process", type=int, default=0, metavar="I",
                            help="index of this process, in 0..N-1 (default 0)")
        parser.add_argument("--hostfile", default=None, metavar="FILE",
                            help="file of host:port lines, one per process (default 127.0.0.1:2101, :2102, ...)")
    parser.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                        help="serve Prometheus metrics on PORT (process p on PORT+p; 0: any free port)")
    parser.add_argument("--ui", dest="ui_port", type=int, default=None, metavar="PORT",
                        help="serve the live dataflow view on PORT (process p on PORT+p; 0: any free port)")
    parser.add_argument("--tls-cert", default=None, metavar="FILE",
                        help="this process's TLS certificate (PEM): the processes talk over TLS")
    parser.add_argument("--tls-key", default=None, metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--tls-ca", default=None, metavar="FILE",
                        help="the CA certificates to trust (PEM): peers must present a certificate it signed")


_PROGRAM_ARGUMENTS = ("program arguments go after '--', or declare the program's options with "
                      "execute_from_args(build, parser=an argparse.ArgumentParser)")
_NUMBER = re.compile(r"^-\d+(\.\d*)?$")


def parse_args(argv: Sequence[str] | None = None, *, parser: argparse.ArgumentParser | None = None,
               prog: str | None = None) -> tuple[argparse.Namespace, list[str]]:
    """The command line of a program run by aiotimely (``sys.argv[1:]`` by default): ``-w/--workers``,
    ``-n/--processes``, ``-p/--process``, ``--hostfile``, ``--metrics-port``, ``--ui``, ``--tls-cert``,
    ``--tls-key``, ``--tls-ca``, and ``-h/--help``.

    Returns the options and the program's own arguments: positional ones, and everything after ``--``. An
    option it does not know is an error (status 2, one line naming it). A program with options of its own
    passes ``parser``, an ``argparse.ArgumentParser`` declaring them: the returned namespace then holds them
    too (the program's arguments list is empty), and ``-h`` shows both. The TLS options are set in
    ``os.environ`` (``AIOTIMELY_TLS_CERT``, ``_KEY``, ``_CA``), where :func:`~aiotimely.execute` finds them.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if parser is not None:
        args = _parse_with(parser, argv, prog)
    else:
        args, rest = _parse_own(argv, prog)
    _export_tls(args)
    return args, rest


def _parse_with(parser: argparse.ArgumentParser, argv: list[str], prog: str | None) -> argparse.Namespace:
    """``argv`` read by the program's ``parser`` and aiotimely's options together (``-h`` shows both)."""
    combined = OptionParser(prog=prog or parser.prog, usage=parser.usage, description=parser.description,
                            epilog=parser.epilog, formatter_class=parser.formatter_class, parents=[parser],
                            add_help=not parser.add_help, allow_abbrev=False)
    add_options(combined.add_argument_group("aiotimely options"))
    return combined.parse_args(argv)


def _parse_own(argv: list[str], prog: str | None) -> tuple[argparse.Namespace, list[str]]:
    """aiotimely's options in ``argv``, and the program's arguments: the positional ones, and all after ``--``;
    an unknown option is an error."""
    own = OptionParser(prog=prog, allow_abbrev=False,
                       description="Options of aiotimely. Positional arguments, and everything after '--', are the "
                                   "program's own.")
    add_options(own)
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = own.parse_known_args(argv[:cut])
    unknown = [a for a in extra if a.startswith("-") and a != "-" and not _NUMBER.match(a)]
    if unknown:
        own.exit(2, f"{own.prog}: unrecognized option {unknown[0]!r}: {_PROGRAM_ARGUMENTS} (see {own.prog} -h)\n")
    return args, extra + argv[cut + 1:]


def _export_tls(args: argparse.Namespace) -> None:
    """Set the TLS options given in ``os.environ``, as absolute paths, where the computation finds them."""
    for option, variable in (("tls_cert", ENV_CERT), ("tls_key", ENV_KEY), ("tls_ca", ENV_CA)):
        value = getattr(args, option, None)
        if value:
            os.environ[variable] = os.path.abspath(value)


def execute_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`~aiotimely.execute` that a command line parsed by :func:`parse_args` gives
    (``workers``, ``processes``, ``process``, ``addresses`` from the host file, ``metrics_port``, ``ui_port``)."""
    addresses = None
    if args.hostfile:
        with open(args.hostfile) as f:
            addresses = [line.strip() for line in f if line.strip()]
    return {"workers": args.workers, "processes": args.processes, "process": args.process, "addresses": addresses,
            "metrics_port": args.metrics_port, "ui_port": args.ui_port}
