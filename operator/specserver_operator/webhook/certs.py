"""The admission webhook's TLS: a self-signed CA and a serving certificate signed by it.

Pure (time passed in): ``build_bundle`` makes a new CA and serving pair; ``usable`` says whether
a stored bundle still serves these names for long enough. The operator keeps the bundle in a
Secret it owns and the CA in the ValidatingWebhookConfiguration's caBundle (service.py).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)
#: A bundle closer than this to its expiry is replaced at the next start or check.
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class Bundle:
    """PEM texts: the CA certificate, the serving certificate and its private key."""

    ca_crt: str
    tls_crt: str
    tls_key: str

    def as_secret_data(self) -> dict[str, str]:
        """The keys of a kubernetes.io/tls Secret (plus ca.crt)."""
        return {"ca.crt": self.ca_crt, "tls.crt": self.tls_crt, "tls.key": self.tls_key}

    @classmethod
    def from_secret_data(cls, data: dict[str, str]) -> Bundle | None:
        """The bundle in a Secret's decoded data, or None when a key is missing."""
        if not all(data.get(k) for k in ("ca.crt", "tls.crt", "tls.key")):
            return None
        return cls(data["ca.crt"], data["tls.crt"], data["tls.key"])


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def build_bundle(names: list[str], now: dt.datetime) -> Bundle:
    """A new CA and a serving certificate for ``names`` (DNS names or IP addresses).

    Args:
        names: what the apiserver dials: the Service's DNS names, or 127.0.0.1 locally.
        now: the issue time (timezone-aware).
    """
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("specserver-webhook-ca")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(_san(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return Bundle(
        ca.public_bytes(pem).decode(),
        cert.public_bytes(pem).decode(),
        key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
    )


def usable(bundle: Bundle, names: list[str], now: dt.datetime) -> bool:
    """Whether a stored bundle covers ``names`` and stays valid past ``RENEW_BEFORE``."""
    try:
        cert = x509.load_pem_x509_certificate(bundle.tls_crt.encode())
        x509.load_pem_x509_certificate(bundle.ca_crt.encode())
    except ValueError:
        return False
    if cert.not_valid_after_utc - now < RENEW_BEFORE:
        return False
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    have = {str(v) for v in san.get_values_for_type(x509.DNSName)} | {
        str(v) for v in san.get_values_for_type(x509.IPAddress)
    }
    return set(names) <= have
