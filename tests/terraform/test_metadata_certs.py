"""scripts/metadata-certs.sh, run: the certificates it issues for the metadata
port's mutual TLS carry the roles' SPIFFE IDs, the addresses of the metadata
nodes and the right key usages, verify against its CA, and keep their keys
mode 0600; a second run reuses the CA; bad arguments write nothing.

Run through scripts/test-terraform.sh (it needs only openssl).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "metadata-certs.sh"
DOMAIN = "floe.example.com"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")


def certs(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), str(out), *args], capture_output=True, text=True, timeout=120)


def openssl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)


def extensions(cert: Path) -> str:
    run = openssl("x509", "-in", str(cert), "-noout", "-ext", "subjectAltName,extendedKeyUsage,keyUsage,basicConstraints")
    assert run.returncode == 0, run.stderr
    return " ".join(run.stdout.split())


def verify(out: Path, name: str, *options: str) -> bool:
    run = openssl("verify", "-CAfile", str(out / "ca.pem"), *options, str(out / f"{name}.pem"))
    return run.returncode == 0 and run.stdout.strip().endswith(": OK")


def fingerprint(cert: Path) -> str:
    return openssl("x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256").stdout


def days_valid(cert: Path) -> int:
    dates = dict(line.split("=", 1) for line in
                 openssl("x509", "-in", str(cert), "-noout", "-startdate", "-enddate").stdout.splitlines())
    start, end = (datetime.strptime(dates[k], "%b %d %H:%M:%S %Y %Z") for k in ("notBefore", "notAfter"))
    return round((end - start).total_seconds() / 86400)


@pytest.fixture(scope="module")
def issued(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("certs") / "out"
    run = certs(out, DOMAIN, "--peer", "1=10.0.1.5", "--peer", "2=meta-2.internal", "--peer", "3=fd00::3",
                "--agent", "1", "--agent", "2", "--operator", "alice")
    assert run.returncode == 0, run.stderr
    return out


def test_issues_the_ca_and_every_identity_with_private_keys(issued):
    names = ["peer-1", "peer-2", "peer-3", "agent-1", "agent-2", "operator-alice"]
    assert sorted(p.name for p in issued.iterdir()) == sorted(
        ["ca.pem", "ca-key.pem"] + [f"{n}.pem" for n in names] + [f"{n}-key.pem" for n in names])
    for key in issued.glob("*-key.pem"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
        assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----\n"), key  # PKCS#8
        text = openssl("pkey", "-in", str(key), "-noout", "-text").stdout
        assert "prime256v1" in text, key
    for cert in issued.glob("*.pem"):
        if not cert.name.endswith("-key.pem"):
            assert stat.S_IMODE(cert.stat().st_mode) == 0o644, cert
    ca = extensions(issued / "ca.pem")
    assert "Basic Constraints: critical CA:TRUE, pathlen:0" in ca and "Certificate Sign, CRL Sign" in ca
    assert days_valid(issued / "ca.pem") == 3650


def test_peers_carry_their_id_and_address_and_serve_and_connect(issued):
    sans = {1: "IP Address:10.0.1.5", 2: "DNS:meta-2.internal", 3: "IP Address:FD00:0:0:0:0:0:0:3"}
    for n, san in sans.items():
        ext = extensions(issued / f"peer-{n}.pem")
        assert f"Subject Alternative Name: URI:spiffe://{DOMAIN}/floe/peer/{n}, {san}" in ext
        assert "Extended Key Usage: TLS Web Server Authentication, TLS Web Client Authentication" in ext
        assert "Key Usage: critical Digital Signature" in ext and "CA:FALSE" in ext
        assert verify(issued, f"peer-{n}", "-purpose", "sslserver")
        assert verify(issued, f"peer-{n}", "-purpose", "sslclient")
    # Clients check the name they dial.
    assert verify(issued, "peer-1", "-verify_ip", "10.0.1.5")
    assert verify(issued, "peer-2", "-verify_hostname", "meta-2.internal")
    assert not verify(issued, "peer-2", "-verify_hostname", "meta-3.internal")
    assert not verify(issued, "peer-1", "-verify_hostname", "localhost")
    assert days_valid(issued / "peer-1.pem") == 365


def test_agents_serve_each_other_and_operators_are_clients_only(issued):
    # Agents serve each other blocks on their peer listeners: serverAuth as well; no DNS or IP
    # name, since agents check each other's role, not an address.
    for name, uri in (("agent-1", "agent/1"), ("agent-2", "agent/2")):
        ext = extensions(issued / f"{name}.pem")
        assert f"Subject Alternative Name: URI:spiffe://{DOMAIN}/floe/{uri} " in ext + " "
        assert "Extended Key Usage: TLS Web Server Authentication, TLS Web Client Authentication" in ext
        assert "DNS:" not in ext and "IP Address:" not in ext
        assert verify(issued, name, "-purpose", "sslclient")
        assert verify(issued, name, "-purpose", "sslserver")
    ext = extensions(issued / "operator-alice.pem")
    assert f"Subject Alternative Name: URI:spiffe://{DOMAIN}/floe/operator/alice " in ext + " "
    assert "Extended Key Usage: TLS Web Client Authentication" in ext and "Server" not in ext
    assert verify(issued, "operator-alice", "-purpose", "sslclient")
    assert not verify(issued, "operator-alice", "-purpose", "sslserver")


def test_a_second_run_reuses_the_ca_and_touches_only_what_it_names(issued, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(issued, out)
    ca, agent, peer = (fingerprint(out / n) for n in ("ca.pem", "agent-1.pem", "peer-2.pem"))
    run = certs(out, DOMAIN, "--peer", "2=meta-2.internal", "--days", "30")
    assert run.returncode == 0, run.stderr
    assert "reusing the CA" in run.stdout
    assert fingerprint(out / "ca.pem") == ca
    assert fingerprint(out / "agent-1.pem") == agent
    assert fingerprint(out / "peer-2.pem") != peer
    assert verify(out, "peer-2") and verify(out, "agent-1")
    assert days_valid(out / "peer-2.pem") == 30
    assert not list(out.glob(".metadata-certs.*")), "temporary directory left behind"
    # One trust domain per CA.
    other = certs(out, "other.example", "--agent", "3")
    assert other.returncode != 0 and "trust domain floe.example.com" in other.stderr
    # Half a CA, or a key of another certificate, is refused.
    (out / "ca-key.pem").unlink()
    assert certs(out, DOMAIN, "--agent", "3").returncode != 0
    shutil.copy(out / "agent-1-key.pem", out / "ca-key.pem")
    mismatch = certs(out, DOMAIN, "--agent", "3")
    assert mismatch.returncode != 0 and "is not the key of" in mismatch.stderr
    assert not (out / "agent-3.pem").exists()


@pytest.mark.parametrize("args", [
    ["Floe.Example"],
    [DOMAIN, "--peer", "1"],
    [DOMAIN, "--peer", "0=meta-0"],
    [DOMAIN, "--peer", "1=meta-1:9093"],
    [DOMAIN, "--peer", "1=999.1.1.1"],
    [DOMAIN, "--peer", "1=a:b:c"],
    [DOMAIN, "--peer", "1=meta-1", "--peer", "1=meta-2"],
    [DOMAIN, "--agent", "one"],
    [DOMAIN, "--operator", "../alice"],
    [DOMAIN, "--days", "0"],
    [DOMAIN, "--agent"],
    [DOMAIN, "--bogus", "1"],
    [],
], ids=["domain", "peer-no-address", "peer-zero", "peer-port", "peer-bad-ip", "peer-bad-ipv6", "peer-twice",
        "agent-not-a-number", "operator-path", "days-zero", "no-value", "unknown-option", "no-domain"])
def test_bad_arguments_write_nothing(tmp_path, args):
    out = tmp_path / "out"
    run = certs(out, *args)
    assert run.returncode != 0
    assert run.stderr.strip()
    assert not out.exists()


def test_usage_is_the_comment_at_the_top():
    run = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 2
    assert "scripts/metadata-certs.sh OUT_DIR DOMAIN" in run.stderr and "set -euo" not in run.stderr
    assert os.access(SCRIPT, os.X_OK), "scripts/metadata-certs.sh must be executable (the chaos harness runs it)"
