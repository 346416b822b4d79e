"""A throwaway certificate authority and a server certificate for 127.0.0.1 and localhost.

Made fresh for each test session with the ``cryptography`` package (ECDSA P-256, valid for a
day), so nothing secret is checked in and a test passes ``verify=tls.ca_path`` to bizmsg exactly
as a user with a private CA would. The leaf is what rustls (webpki) insists on: a v3
certificate with the names in subjectAltName, serverAuth, signed by a CA whose basicConstraints
say so.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from .availability import ServiceUnavailable


@dataclass(frozen=True)
class TLSFiles:
    """PEM files: ``ca_path`` to trust, ``cert_path`` + ``key_path`` for the server,
    ``combined_path`` (certificate then key, as HAProxy's ``crt`` wants)."""

    ca_path: Path
    cert_path: Path
    key_path: Path
    combined_path: Path


def make_tls_files(folder: Path) -> TLSFiles:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as error:
        raise ServiceUnavailable("the Python package 'cryptography' is not installed: "
                                 "pip install -e \".[dev]\", or run .ci/run") from error

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bizmsg test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    files = TLSFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key",
                     folder / "server-combined.pem")
    files.ca_path.write_bytes(ca_cert.public_bytes(pem))
    files.cert_path.write_bytes(cert.public_bytes(pem))
    files.key_path.write_bytes(key_pem)
    files.combined_path.write_bytes(cert.public_bytes(pem) + key_pem)
    for secret in (files.key_path, files.combined_path):
        secret.chmod(0o600)
    return files
