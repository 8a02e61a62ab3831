"""Certificates for the TLS tests, made once per session with the openssl command (EC P-256: fast)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

KEY_PASSWORD = "key-pass-7Qx"
EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]


@dataclass(frozen=True)
class Pki:
    ca: Path             # the CA that signed the certificates below
    other_ca: Path       # a CA that signed nothing here
    server: Path         # server certificate for 127.0.0.1 and localhost ...
    server_key: Path     # ... and its key
    misnamed: Path       # server certificate for broker.invalid only (hostname mismatch at 127.0.0.1) ...
    misnamed_key: Path   # ... and its key
    client: Path         # client certificate ...
    client_key: Path     # ... and its key, encrypted with KEY_PASSWORD

    def server_context(self, *, misnamed: bool = False, require_client_cert: bool = False) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if misnamed:
            ctx.load_cert_chain(self.misnamed, self.misnamed_key)
        else:
            ctx.load_cert_chain(self.server, self.server_key)
        if require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(self.ca)
        return ctx


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(name: str, cwd: Path) -> None:
    _openssl("req", "-x509", *EC, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "3650",
             "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=cwd)


def _signed(name: str, extensions: str, cwd: Path, *, password: str | None = None) -> None:
    key_args = ["-passout", f"pass:{password}"] if password else ["-nodes"]
    _openssl("req", *EC, *key_args, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=cwd)
    (cwd / f"{name}.ext").write_text(extensions + "\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.pem", "-days", "3650", "-extfile", f"{name}.ext", cwd=cwd)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make the test certificates")
    d = tmp_path_factory.mktemp("pki")
    _ca("ca", d)
    _ca("other-ca", d)
    server_ext = "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth"
    _signed("server", server_ext + "\nsubjectAltName=IP:127.0.0.1,DNS:localhost", d)
    _signed("misnamed", server_ext + "\nsubjectAltName=DNS:broker.invalid", d)
    _signed("client", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth", d, password=KEY_PASSWORD)
    return Pki(ca=d / "ca.pem", other_ca=d / "other-ca.pem", server=d / "server.pem", server_key=d / "server.key",
               misnamed=d / "misnamed.pem", misnamed_key=d / "misnamed.key", client=d / "client.pem",
               client_key=d / "client.key")
