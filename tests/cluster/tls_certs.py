"""Test certificates, made at test time with the ``openssl`` command: a CA, nodes it signed, and a stranger."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiotimely.comm.tls import TLSConfig

__all__ = ["Certificates", "make_certificates"]


@dataclass
class Certificates:
    """PEM files in ``where``: ``ca.pem``; ``node.pem``/``node.key`` signed by it (for localhost and
    127.0.0.1); ``stranger.pem``/``stranger.key`` signed by another CA (``other-ca.pem``)."""

    where: Path

    def path(self, name: str) -> str:
        return str(self.where / name)

    def node(self, **kw: object) -> TLSConfig:
        return TLSConfig(cert=self.path("node.pem"), key=self.path("node.key"), ca=self.path("ca.pem"), **kw)  # type: ignore[arg-type]

    def stranger(self) -> TLSConfig:
        return TLSConfig(cert=self.path("stranger.pem"), key=self.path("stranger.key"), ca=self.path("ca.pem"))

    def env(self) -> dict[str, str]:
        return {"AIOTIMELY_TLS_CERT": self.path("node.pem"), "AIOTIMELY_TLS_KEY": self.path("node.key"),
                "AIOTIMELY_TLS_CA": self.path("ca.pem")}


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(name: str, cwd: Path) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=aiotimely test {name}",
             cwd=cwd)


def _leaf(name: str, ca: str, cwd: Path, serial: int) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", f"/CN=aiotimely test {name}", cwd=cwd)
    (cwd / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-set_serial",
             str(serial), "-days", "2", "-out", f"{name}.pem", "-extfile", "san.ext", cwd=cwd)


def make_certificates(where: Path) -> Certificates:
    """Make the test certificates in ``where`` (skips the test when there is no ``openssl`` command)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    where.mkdir(parents=True, exist_ok=True)
    _ca("ca", where)
    _ca("other-ca", where)
    _leaf("node", "ca", where, 1001)
    _leaf("stranger", "other-ca", where, 1002)
    return Certificates(where)
