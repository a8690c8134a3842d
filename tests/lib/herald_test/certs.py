"""herald_test.certs: X.509 certificates for the tests' TLS servers, made
with the openssl command line."""
import os
import subprocess


def make_ca(d):
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=60)

    ca_key, ca, key, csr, crt = (os.path.join(d, n) for n in
                                 ("ca.key", "ca.pem", "srv.key", "srv.csr", "srv.pem"))
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
        "-days", "2", "-subj", "/CN=herald test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", crt, "-days", "2", "-extfile", ext)
    return ca, crt, key
