"""standin: what the provider stand-ins share.

- make_ca(dir): a throw-away test CA and a server certificate for
  127.0.0.1 / localhost signed by it (ca.pem, server.pem, server.key);
- the common command line (--host, --port 0 = any free port, --cert/--key
  for TLS, --record FILE, --max-seconds);
- Recorder: one JSON object a line, appended and flushed per event, so a
  test reads what a stand-in saw while it runs;
- ready(port): the one line a stand-in prints on stdout once it listens,
  "READY port=<n>", which tests wait for.

Stand-ins run on loopback only, under /usr/bin/python3 (Debian's modules).
"""
import argparse
import datetime
import ipaddress
import json
import os
import ssl
import sys
import threading

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(directory):
    """Writes ca.pem, server.pem and server.key into DIRECTORY; returns their paths."""
    now = datetime.datetime.now(datetime.timezone.utc)
    life = datetime.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder()
          .subject_name(_name("herald test CA")).issuer_name(_name("herald test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + life)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                       x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (x509.CertificateBuilder()
            .subject_name(_name("localhost")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + life)
            .add_extension(san, critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    paths = {n: os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key")}
    with open(paths["ca.pem"], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths["server.pem"], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths["server.key"], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths


def arg_parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    p.add_argument("--cert", help="server certificate (PEM); without it: plain text")
    p.add_argument("--key", help="its private key (PEM)")
    p.add_argument("--record", help="append one JSON line per event to this file")
    p.add_argument("--max-seconds", type=float, default=600,
                   help="exit after this long whatever happens (bounded tests)")
    return p


def server_tls(args, alpn=None):
    """An SSLContext for the server side, or None without --cert."""
    if not args.cert:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert, args.key)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


class Recorder:
    """Appends events as JSON lines to PATH (nothing when PATH is None)."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def __call__(self, event, **fields):
        if self.path is None:
            return
        fields["event"] = event
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(fields, sort_keys=True) + "\n")


class ProviderState:
    """What the push stand-ins start from: their arguments, the public key
    that verifies the tokens they are sent, the device tokens to answer as
    unregistered (--unregistered) and a Recorder."""

    def __init__(self, args):
        self.args = args
        with open(args.public_key, "rb") as f:
            self.public_key = f.read()
        self.unregistered = set(args.unregistered or [])
        self.record = Recorder(args.record)


def ready(port):
    print(f"READY port={port}", flush=True)


def exit_after(seconds):
    """Ends the process after SECONDS, so no stand-in outlives its test."""
    t = threading.Timer(seconds, lambda: os._exit(0))
    t.daemon = True
    t.start()


def read_lines(path):
    """The JSON events recorded in PATH so far."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    sys.exit("standin.py is a module")
