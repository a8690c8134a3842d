"""herald_test.certs: X.509 certificates for the tests' TLS servers and
clients, made with the openssl command line (RSA 2048, valid 2 days)."""
import os
import subprocess


def _openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=60)


def new_ca(d, name="ca"):
    """A self-signed CA in directory D: (NAME.pem, NAME.key)."""
    crt, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
             "-days", "2", "-subj", "/CN=herald test CA %s" % name)
    return crt, key


def issue(d, ca, name, cn, san=None):
    """A certificate for common name CN signed by CA (new_ca's pair), in D:
    (NAME.pem, NAME.key).  SAN is its subjectAltName ("IP:127.0.0.1"); a
    certificate without one is a client's."""
    crt, key, csr = (os.path.join(d, name + ext) for ext in (".pem", ".key", ".csr"))
    ext = os.path.join(d, name + ".cnf")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        if san:
            f.write("subjectAltName=%s\n" % san)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
             "-subj", "/CN=%s" % cn)
    _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
             "-out", crt, "-days", "2", "-extfile", ext)
    return crt, key


def make_ca(d):
    """A CA and a server certificate for 127.0.0.1 signed by it:
    (ca.pem, srv.pem, srv.key)."""
    ca = new_ca(d)
    crt, key = issue(d, ca, "srv", "127.0.0.1", "IP:127.0.0.1")
    return ca[0], crt, key
