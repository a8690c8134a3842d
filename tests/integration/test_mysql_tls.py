#!/usr/bin/env python3
"""MySQL over TLS (issue 31, finding 3): a private mariadbd with TLS on
(certificates from a CA made here with openssl), listening on 127.0.0.1
and 127.0.0.2, whose users require TLS; heraldctl migrate is the client
(hr_mysql_connect, which every herald binary uses):

1. mysql.tls off: the server refuses the user (REQUIRE SSL): the premise.
2. tls on, ca_file the CA: the migrations are applied, over TLS.
3. tls on, ca_file another CA: refused, exit 1, the message names the TLS
   verification failure and that herald was verifying.
4. tls on, no ca_file: the system's trust store does not know the CA: refused.
5. tls on, the server reached as 127.0.0.2, a name its certificate does not
   give: refused (the host name is verified, not only the chain).
6. tls on, verify: false, another CA: connects (the explicit opt-out).
7. a user that requires a client certificate: with cert_file and key_file
   it connects, without them it is refused.
8. with HERALD_TEST_CONFIG: the local stack's MariaDB, which has no TLS,
   with tls on: refused, by libmariadb before authenticating when verify is
   on, by herald's check of the session's cipher when it is off (libmariadb
   3.3 would go on in clear).

usage: test_mysql_tls.py HERALDCTL
Needs no stack for 1-7; exits 77 without mariadbd, mariadb-install-db,
mariadb-admin or openssl.  Every wait is bounded."""
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish, free_port, stop_popen, wait_until  # noqa: E402
from herald_test.certs import issue, new_ca  # noqa: E402
from herald_test.stack import Settings  # noqa: E402

PASSWORD = "tls-test-password"
TOOLS = ("mariadbd", "mariadb-install-db", "mariadb-admin", "mariadb", "openssl")


class Server:
    """A mariadbd of its own in directory D with TLS from SRV (cert, key)
    signed by CA, on PORT of 127.0.0.1 and 127.0.0.2."""

    def __init__(self, d, ca, srv):
        self.d, self.port = d, free_port()
        self.sock = os.path.join(d, "mysql.sock")
        self.me = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        user = ["--user=root"] if os.getuid() == 0 else []
        data = os.path.join(d, "data")
        out = subprocess.run(["mariadb-install-db", "--no-defaults", "--datadir=" + data] + user
                             + ["--auth-root-authentication-method=socket",
                                "--auth-root-socket-user=" + self.me, "--skip-test-db"],
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError("mariadb-install-db: " + out.stdout[-500:] + out.stderr[-500:])
        os.mkdir(os.path.join(d, "tmp"))
        self.log = open(os.path.join(d, "mariadbd.log"), "ab")
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults"] + user
            + ["--datadir=" + data, "--bind-address=127.0.0.1,127.0.0.2",
               "--port=%d" % self.port, "--socket=" + self.sock,
               "--pid-file=" + os.path.join(d, "mariadbd.pid"), "--skip-name-resolve",
               "--skip-log-bin", "--innodb-buffer-pool-size=32M",
               "--tmpdir=" + os.path.join(d, "tmp"), "--ssl-ca=" + ca[0],
               "--ssl-cert=" + srv[0], "--ssl-key=" + srv[1]],
            stdout=self.log, stderr=self.log)

    def ready(self):
        return wait_until(lambda: self.proc.poll() is not None or subprocess.run(
            ["mariadb-admin", "--no-defaults", "--socket=" + self.sock, "-u" + self.me, "ping"],
            capture_output=True, timeout=10).returncode == 0, 60, 0.2) and self.proc.poll() is None

    def sql(self, text):
        out = subprocess.run(["mariadb", "--no-defaults", "--socket=" + self.sock,
                              "-u" + self.me, "-N", "-B", "-e", text],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError("mariadb: " + out.stderr)
        return out.stdout

    def stop(self):
        stop_popen(self.proc, 30)
        self.log.close()


def migrate(heraldctl, d, host, port, user, tls, password=PASSWORD):
    """heraldctl migrate against HOST:PORT as USER with mysql.tls TLS (a
    dict, None: no tls section); the CompletedProcess."""
    mysql = {"host": host, "port": port, "user": user, "password": password,
             "database": "herald", "connect_timeout_s": 5}
    if tls is not None:
        mysql["tls"] = tls
    cfg = {"mysql": mysql, "channels": {"w": {"url": "http://127.0.0.1:9/push"}}}
    fd, path = tempfile.mkstemp(suffix=".yaml", dir=d)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(cfg, f)
    return subprocess.run([heraldctl, "-c", path, "migrate"], capture_output=True, text=True,
                          timeout=60)


def said(out):
    return (out.stdout + out.stderr).strip().replace("\n", " | ")[:300]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    heraldctl = sys.argv[1]
    missing = [t for t in TOOLS if shutil.which(t) is None and
               not os.path.exists(os.path.join("/usr/sbin", t))]
    if missing:
        print("not installed: %s: skipped" % ", ".join(missing))
        return 77
    os.environ["PATH"] += os.pathsep + "/usr/sbin"
    d = tempfile.mkdtemp(prefix="herald-mysqltls-")
    server = None
    try:
        ca = new_ca(d, "ca")
        other = new_ca(d, "other")
        srv = issue(d, ca, "srv", "127.0.0.1", "IP:127.0.0.1")
        client = issue(d, ca, "client", "herald-client")
        server = Server(d, ca, srv)
        if not check(server.ready(), "a private mariadbd with TLS on 127.0.0.1:%d" % server.port):
            return finish()
        server.sql("CREATE DATABASE herald CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci; "
                   "CREATE USER 'herald'@'%%' IDENTIFIED BY '%s' REQUIRE SSL; "
                   "CREATE USER 'heraldx'@'%%' IDENTIFIED BY '%s' "
                   "REQUIRE SUBJECT '/CN=herald-client'; "
                   "GRANT ALL PRIVILEGES ON herald.* TO 'herald'@'%%', 'heraldx'@'%%'; "
                   % (PASSWORD, PASSWORD))
        port = server.port

        out = migrate(heraldctl, d, "127.0.0.1", port, "herald", None)
        check(out.returncode != 0 and "Access denied" in out.stderr,
              "1. tls off: the server refuses the user that requires TLS (%s)" % said(out))
        out = migrate(heraldctl, d, "127.0.0.1", port, "herald",
                      {"enabled": True, "ca_file": ca[0]})
        tables = server.sql("SELECT COUNT(*) FROM information_schema.tables "
                            "WHERE table_schema = 'herald' AND table_name = 'push_task'")
        check(out.returncode == 0 and tables.strip() == "1",
              "2. tls on with the CA: migrations applied over TLS (%s)" % said(out))
        out = migrate(heraldctl, d, "127.0.0.1", port, "herald",
                      {"enabled": True, "ca_file": other[0]})
        check(out.returncode == 1 and "verifying the server's certificate" in out.stderr
              and ("certificate" in out.stderr.lower() or "ssl" in out.stderr.lower()),
              "3. tls on, another CA: refused, the error says so (%s)" % said(out))
        out = migrate(heraldctl, d, "127.0.0.1", port, "herald", {"enabled": True})
        check(out.returncode == 1 and "verifying the server's certificate" in out.stderr,
              "4. tls on, the system's trust store: refused (%s)" % said(out))
        out = migrate(heraldctl, d, "127.0.0.2", port, "herald",
                      {"enabled": True, "ca_file": ca[0]})
        check(out.returncode == 1 and "verifying the server's certificate" in out.stderr,
              "5. tls on, a host name the certificate does not give: refused (%s)" % said(out))
        out = migrate(heraldctl, d, "127.0.0.1", port, "herald",
                      {"enabled": True, "ca_file": other[0], "verify": False})
        check(out.returncode == 0, "6. verify: false connects whatever the CA (%s)" % said(out))
        out = migrate(heraldctl, d, "127.0.0.1", port, "heraldx",
                      {"enabled": True, "ca_file": ca[0], "cert_file": client[0],
                       "key_file": client[1]})
        check(out.returncode == 0, "7. a client certificate for the user that requires one (%s)"
              % said(out))
        out = migrate(heraldctl, d, "127.0.0.1", port, "heraldx",
                      {"enabled": True, "ca_file": ca[0]})
        check(out.returncode != 0 and "Access denied" in out.stderr,
              "7. ... and without it: refused (%s)" % said(out))

        if os.environ.get("HERALD_TEST_CONFIG"):
            stack = Settings.load()
            for verify in (True, False):
                out = migrate(heraldctl, d, stack.mysql["host"], stack.mysql["port"],
                              stack.mysql["user"], {"enabled": True, "verify": verify},
                              stack.mysql["password"])
                check(out.returncode == 1 and ("TLS" in out.stderr or "SSL" in out.stderr),
                      "8. the stack's MariaDB has no TLS, verify %s: refused (%s)"
                      % (verify, said(out)))
        else:
            print("HERALD_TEST_CONFIG is not set: part 8 (a server without TLS) skipped")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
