"""The command line as people expect it: -h is help everywhere, --version, unknown options are one-line errors,
the host file is --hostfile, and run passes options and program arguments on (real processes)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiotimely.execution import execute_options, parse_args

ROOT = Path(__file__).resolve().parent.parent.parent
PROGRAMS = "tests/cli/programs.py"


def aiotimely(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiotimely", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def script(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_help_lists_the_commands_one_line_each():
    done = aiotimely("-h")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("commands:\n")[1].split("\n\n")[0].splitlines()[1:]
    assert [line.split()[0] for line in lines] == ["run", "worker", "bench"], done.stdout
    assert aiotimely("--help").stdout == done.stdout


def test_version_is_the_installed_one():
    from importlib.metadata import version

    done = aiotimely("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"aiotimely {version('aiotimely')}"


@pytest.mark.parametrize("command", [["run", "-h"], ["run", "x.py", "--help"], ["worker", "-h"]])
def test_run_and_worker_help(command):
    done = aiotimely(*command)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: aiotimely {command[0]}")
    for option in ("--workers", "--processes", "--metrics-port", "--ui", "--tls-cert", "--tls-key", "--tls-ca"):
        assert option in done.stdout
    assert ("--hostfile" in done.stdout) == (command[0] == "worker")  # run makes the host file itself


def test_a_script_calling_execute_from_args_shows_help_for_h():
    done = script("examples/hello.py", "-h")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: hello.py") and "--hostfile FILE" in done.stdout
    assert "hello" not in done.stdout.split("usage:")[1].split("\n", 1)[1]  # nothing ran


@pytest.mark.parametrize("where", ["run", "script", "worker"])
def test_an_unknown_option_is_a_one_line_error_naming_it(where):
    if where == "run":
        done = aiotimely("run", "examples/hello.py", "-w", "2", "--verbose")
    elif where == "script":
        done = script("examples/hello.py", "--verbose")
    else:
        done = aiotimely("worker", f"{PROGRAMS}:ticking", "--verbose")
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "'--verbose'" in done.stderr or "--verbose" in done.stderr
    assert "after '--'" in done.stderr or where == "worker"
    assert done.stdout == ""


def test_h_is_no_longer_the_host_file():
    done = script("examples/hello.py", "-h", "hosts.txt")
    assert done.returncode == 0 and done.stdout.startswith("usage:")


def test_a_bad_value_is_a_one_line_error():
    done = aiotimely("run", "examples/hello.py", "-w", "two")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert "-w/--workers" in done.stderr and "'two'" in done.stderr


def test_parse_args_keeps_positional_arguments_and_everything_after_the_dashes(tmp_path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("127.0.0.1:5000\n127.0.0.1:5001\n")
    args, rest = parse_args(["-w", "3", "input.txt", "-n", "2", "-p", "1", "--hostfile", str(hosts), "--ui", "8080",
                             "--", "--not-ours", "-x"])
    assert rest == ["input.txt", "--not-ours", "-x"]
    assert execute_options(args) == {"workers": 3, "processes": 2, "process": 1, "metrics_port": None,
                                      "ui_port": 8080, "addresses": ["127.0.0.1:5000", "127.0.0.1:5001"]}


def test_a_program_declares_its_own_options_with_parser(capsys):
    own = argparse.ArgumentParser(prog="prog.py", description="my program", add_help=False)
    own.add_argument("--recovery", help="a directory for snapshots")
    args, rest = parse_args(["--recovery", "state", "-w", "2"], parser=own)
    assert (args.recovery, args.workers, rest) == ("state", 2, [])
    with pytest.raises(SystemExit) as exit:
        parse_args(["-h"], parser=own)
    assert exit.value.code == 0
    shown = capsys.readouterr().out
    assert "my program" in shown and "--recovery" in shown and "--workers" in shown
    with pytest.raises(SystemExit) as exit:
        parse_args(["--verbose"], parser=own)
    assert exit.value.code == 2
    error = capsys.readouterr().err
    assert len(error.splitlines()) == 1 and "--verbose" in error


def test_tls_options_reach_the_processes_as_the_variables_the_cluster_reads(tmp_path):
    files = {name: tmp_path / f"{name}.pem" for name in ("cert", "key", "ca")}
    done = aiotimely("run", f"{PROGRAMS}:show_options", "--tls-cert", str(files["cert"]), "--tls-key",
                     str(files["key"]), "--tls-ca", str(files["ca"]), "--", "input.txt", "--flag")
    assert done.returncode == 0, done.stderr
    lines = [line.removeprefix("[process 0] ") for line in done.stdout.splitlines()]
    assert "argv ['input.txt', '--flag']" in lines
    for name in ("cert", "key", "ca"):
        assert f"AIOTIMELY_TLS_{name.upper()} {files[name]}" in lines


def test_parse_args_sets_the_tls_variables_for_this_process(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if not k.startswith("AIOTIMELY_TLS")})
    monkeypatch.chdir(tmp_path)
    parse_args(["--tls-cert", "node.pem", "--tls-key", "node.key"])
    assert os.environ["AIOTIMELY_TLS_CERT"] == str(tmp_path / "node.pem")
    assert os.environ["AIOTIMELY_TLS_KEY"] == str(tmp_path / "node.key")
    assert "AIOTIMELY_TLS_CA" not in os.environ


def test_a_script_gets_its_program_arguments_after_aiotimelys_options():
    done = subprocess.run([sys.executable, "-m", "aiotimely", "run", PROGRAMS, "-n", "2", "--", "input.txt"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PROGRAM": "show_options"})
    assert done.returncode == 0, done.stderr
    # each process ran: python programs.py -w 1 -n 2 -p I --hostfile FILE input.txt
    argv = next(line for line in done.stdout.splitlines() if "argv" in line)
    assert argv.startswith("[process 0] argv ['-w', '1', '-n', '2', '-p', '0', '--hostfile', ")
    assert argv.endswith(", 'input.txt']")


def test_run_with_tls_options_runs_the_cluster_over_tls(tmp_path):
    pytest.importorskip("ssl")
    from tests.cluster.tls_certs import make_certificates

    certs = make_certificates(tmp_path)
    tls = ["--tls-cert", certs.path("node.pem"), "--tls-key", certs.path("node.key"), "--tls-ca", certs.path("ca.pem")]
    done = aiotimely("run", "tests/cluster/programs.py:wordcounts", "-n", "2", *tls)
    assert done.returncode == 0, done.stderr
    missing = aiotimely("run", "tests/cluster/programs.py:wordcounts", "-n", "2", *tls[:2], "--tls-key",
                        str(tmp_path / "missing.key"))
    assert missing.returncode != 0 and "missing.key" in missing.stderr     # the option reached the cluster
