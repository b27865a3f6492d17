"""A self-signed certificate for 127.0.0.1 and localhost, made at start-up with `cryptography`.

The certificate is its own CA (basicConstraints CA:TRUE, critical; key and authority key
identifiers present) so a client can trust exactly this file (`--cacert`, `verify=PATH`), also
under OpenSSL's strict X.509 checks. The private key stays in memory and in a private temporary
file that the server deletes once it has loaded it; only the certificate is written where asked.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class CertPair:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes


def self_signed(hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), days: int = 30) -> CertPair:
    """A fresh EC P-256 certificate valid for `hosts` (IP addresses or DNS names)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lanewatch sim")])
    now = dt.datetime.now(dt.UTC)
    sans: list[x509.GeneralName] = [_san(h) for h in hosts]
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return CertPair(cert.public_bytes(serialization.Encoding.PEM), key_pem)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def write_cert(pair: CertPair, path: Path) -> None:
    """Write the certificate (never the key) to `path`, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Whole or not at all: a client polls for the file and trusts it the moment it exists.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(pair.cert_pem)
    os.replace(tmp, path)


def private_key_file(pair: CertPair) -> Path:
    """The key in a new 0600 file in a private temporary folder; the caller deletes it."""
    folder = Path(tempfile.mkdtemp(prefix="lanewatch-sim-"))
    path = folder / "key.pem"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pair.key_pem)
    return path
