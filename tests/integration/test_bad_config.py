#!/usr/bin/env python3
"""Bad configuration files: herald-dispatcher, herald-worker and heraldctl
each exit 2 with "file:line:col: ..." on stderr, without touching a server.

usage: test_bad_config.py HERALD_DISPATCHER HERALD_WORKER HERALDCTL
(needs no stack, so it never skips)"""
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import check, finish  # noqa: E402

CH = "channels:\n  w: {url: http://127.0.0.1:9/push}\n"
# (what, file text, line:col the message must name)
CASES = [
    ("yaml syntax", "mysql: [\n", "2:1"),
    ("unknown top-level key", "bogus: 1\n" + CH, "1:1"),
    ("out of range", "channels:\n  w:\n    url: http://x/\n    concurrency: 0\n", "4:18"),
    ("not an integer", "redis: {port: abc}\n" + CH, "1:15"),
    ("unset variable", "mysql: {password: \"${HERALD_NO_SUCH_VAR_X}\"}\n" + CH, "1:"),
    ("no channels", "log: {level: info}\n", ""),
    ("bad listen", "dispatcher: {listen: nowhere}\n" + CH, "1:"),
    ("bad url scheme", "channels:\n  w: {url: ftp://x/}\n", "2:"),
    ("binary garbage", "\x00\xff\xfe garbage \x01\n", ""),
    ("huge line", "instance: " + "x" * 2000000 + "\n" + CH, ""),
    ("bad channel template", "channels:\n  w: {url: http://x/, body: '{{uid'}\n", "2:"),
    # Insecure mode only on loopback (issue 31, finding 6).
    ("insecure off loopback",
     "dispatcher:\n  listen: 0.0.0.0:8080\n  api: {insecure: true}\n" + CH, "3:19"),
    ("mysql tls file with tls off", "mysql:\n  tls: {ca_file: /etc/ca.pem}\n" + CH, "2:18"),
    ("key of another channel type",
     "channels:\n  m:\n    type: smtp\n    url: smtp://x\n    from: a@b\n    method: GET\n",
     "6:5"),
]
# Known bugs: each case still runs and prints XFAIL; when it starts passing
# the run fails with XPASS so the entry is moved up.
KNOWN_BUGS = []


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    bins = {"dispatcher": [sys.argv[1]], "worker": [sys.argv[2]],
            "heraldctl": [sys.argv[3], "list"]}
    d = tempfile.mkdtemp(prefix="herald-badcfg-")
    env = dict(os.environ)
    env.pop("HERALD_NO_SUCH_VAR_X", None)
    for i, (what, text, pos) in enumerate(CASES + KNOWN_BUGS):
        known = i >= len(CASES)
        path = os.path.join(d, "c%d.yaml" % i)
        with open(path, "w", encoding="latin-1") as f:
            f.write(text)
        for name, argv in bins.items():
            cmd = argv[:1] + ["-c", path] + argv[1:]
            out = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                                 timeout=20, env=env)
            first = out.stderr.strip().splitlines()[0] if out.stderr.strip() else ""
            want = re.escape(path) + ":" + (re.escape(pos) if pos else r"\d+:")
            ok = out.returncode == 2 and re.match(want, first) is not None
            line = "%s: %s exits 2 with file:line:col (%d, %s)" % (what, name, out.returncode,
                                                                   first[:120])
            if known:
                check(not ok, "known bug still present (XPASS means fixed: move it to CASES): " + line)
                if not ok:
                    print("XFAIL known bug: " + line)
            else:
                check(ok, line)
        os.unlink(path)
    os.rmdir(d)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
