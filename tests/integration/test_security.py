#!/usr/bin/env python3
"""Security checks (issue 9 item 4).

1. Only prepared statements: a static check of the C sources (no stack).
2. TLS verification for providers: a TLS provider on loopback with a
   certificate from a CA made here with openssl.  A channel without ca_file
   never delivers (verification is on by default: every uid dead-lettered,
   no request reaches the provider unverified); the same url with
   ca_file: <ca.pem> delivers every uid.
3. Secrets never in logs or metrics: the API token (and a wrong token a
   client sent, and a token read from a tokens_file) are grepped in the
   dispatcher's and worker's logs and /metrics after the run.
4. Insecure settings are never silent (issue 31, finding 4): a channel with
   tls_verify: false and a tokens_file its group and others may read each
   give both daemons a startup warning (insecure_setting) and a count in
   herald_insecure_settings{setting}; the settings not used are 0.  Before,
   both were accepted without a word.  The shared stack's MySQL password ("herald")
   is not distinctive and its Redis has no password: those parts are
   skipped with a message.
API auth on by default (no tokens, not insecure -> exit 2) is tested by
test_api.py (test_refuses_without_tokens) and not repeated here.

usage: test_security.py SOURCE_ROOT HERALD_DISPATCHER HERALD_WORKER"""
import os
import random
import re
import shutil
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish  # noqa: E402
from misbehaving_provider import Provider  # noqa: E402
from herald_test.certs import make_ca  # noqa: E402

SQL_WORD = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|REPLACE)\b")
FMT_CALL = re.compile(r"\b(v?s?n?printf|asprintf)\s*\(([^;]*)", re.S)
RAW_QUERY = re.compile(r"\bmysql_(real_query|query|send_query)\s*\(")


def static_check(root):
    """No SQL text built with a value formatted into it; the text protocol
    (mysql_real_query) only in hr_mysql.c (session setup and the script
    runner), and hr_mysql_script only for migrations (hr_migrate.c) and
    transactions (hr_mysql.c)."""
    bad = []
    for d in ("common", "dispatcher", "worker", "ctl"):
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for name in files:
                if not name.endswith(".c"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                text = open(path, encoding="utf-8", errors="replace").read()
                for m in FMT_CALL.finditer(text):
                    fmt = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2)))
                    if SQL_WORD.search(fmt) and re.search(r"%[-0-9.]*[a-zA-Z]", fmt):
                        line = text.count("\n", 0, m.start()) + 1
                        bad.append("%s:%d: formatted SQL %r" % (rel, line, fmt[:80]))
                if RAW_QUERY.search(text) and rel != os.path.join("common", "hr_mysql.c"):
                    bad.append("%s: text-protocol query outside hr_mysql.c" % rel)
                script_ok = (os.path.join("common", "hr_mysql.c"),
                             os.path.join("common", "hr_migrate.c"))
                if "hr_mysql_script(" in text and rel not in script_ok:
                    bad.append("%s: hr_mysql_script outside the migrations" % rel)
    check(not bad, "only prepared statements (%s)" % "; ".join(bad))


def tls_and_secrets(env, dispatcher, worker):
    if shutil.which("openssl") is None:
        print("openssl not installed: TLS part skipped")
        return
    ca, crt, key = make_ca(env.dir)
    provider = Provider(certfile=crt, keyfile=key)
    wrong = "tok-WRONG-SECRET-%d" % random.randrange(1 << 30)
    try:
        retry = "{max_attempts: 2, backoff_ms: 50, max_backoff_ms: 100}"
        channels = {
            "tls_default": {"url": provider.url("ok", "https"), "timeout_ms": 3000,
                            "retry": retry},
            "tls_ca": {"url": provider.url("ok", "https"), "timeout_ms": 3000, "retry": retry,
                       "ca_file": ca},
            "tls_off": {"url": provider.url("ok", "https"), "timeout_ms": 3000, "retry": retry,
                        "tls_verify": False},
        }
        # A second bootstrap token in a file anyone may read (mode 0644).
        file_token = "tok-FILE-SECRET-%032x" % random.getrandbits(128)
        tokens_file = os.path.join(env.dir, "tokens")
        with open(tokens_file, "w") as f:
            f.write(file_token + "\n")
        os.chmod(tokens_file, 0o644)
        cfg = env.config(channels, api_extra=", tokens_file: %s" % tokens_file)
        if not env.create_topic():
            return
        dsp = env.start([dispatcher, "-c", cfg], "dispatcher.log")
        wk = env.start([worker, "-c", cfg], "worker.log")
        check(env.wait_ready(env.dsp_port) and env.wait_ready(env.wk_port), "daemons serve")
        unverified = env.insert_with_subs("tls-default", "tls_default", range(1, 6))
        verified = env.insert_with_subs("tls-ca", "tls_ca", range(11, 16))
        # API traffic carrying the real token and a wrong one
        status, _ = env.http("GET", "/v1/tasks/%d" % verified)
        check(status == 200, "the API accepts the token")
        status, _ = env.http("GET", "/v1/tasks/%d" % verified, token=file_token)
        check(status == 200, "the API accepts the token of the tokens_file")
        for port, name in ((env.dsp_port, "dispatcher"), (env.wk_port, "worker")):
            text = env.metrics(port)
            for setting, want in (("tls_verify", 1), ("secret_file_mode", 1),
                                  ("require_starttls", 0), ("api_insecure", 0)):
                line = 'herald_insecure_settings{setting="%s"} %d' % (setting, want)
                check(line in text, "%s /metrics: %s" % (name, line))
        status, _ = env.http("GET", "/v1/tasks/%d" % verified, token=wrong)
        check(status == 401, "the API refuses a wrong token")
        for t in (unverified, verified):
            check(env.wait_state(t, "done", 40), "task %d done (%s)" % (t, env.task(t)))
        dl = env.deliveries(unverified)
        check(dl == {u: "failed" for u in range(1, 6)},
              "no ca_file: every push fails verification, dead-lettered (%s)" % dl)
        reasons = set(env.r.cmd("HGETALL", env.key(unverified, "failed"))[1::2])
        check(reasons and all("certificate" in r.lower() or "ssl" in r.lower() for r in reasons),
              "the dead letters name the TLS failure (%s)" % sorted(reasons))
        got = {r["uid"] for r in provider.records}
        check(not (got & set(range(1, 6))), "nothing reached the provider unverified")
        check(provider.tls_failures >= 5, "the provider saw the handshakes refused (%d)"
              % provider.tls_failures)
        dl = env.deliveries(verified)
        check(dl == {u: "sent" for u in range(11, 16)} and got >= set(range(11, 16)),
              "ca_file given: every uid delivered over verified TLS (%s)" % dl)
        texts = {"dispatcher /metrics": env.metrics(env.dsp_port),
                 "worker /metrics": env.metrics(env.wk_port)}
        for p, name in ((wk, "worker log"), (dsp, "dispatcher log")):
            check(env.stop(p) == 0, "%s: clean exit" % name)
            texts[name] = env.log(p)
            check("event=insecure_setting setting=tls_verify detail=channels.tls_off"
                  in texts[name] and "event=insecure_setting setting=secret_file_mode" in texts[name],
                  "%s: a startup warning for each insecure setting" % name)
        for name, text in texts.items():
            check(len(text) > 0, "%s is not empty" % name)
            for secret in (env.token, wrong, file_token):
                check(secret not in text, "%s does not contain %s" % (name, secret[:9] + "..."))
        print("skipped: the stack's MySQL password is not distinctive and its Redis has no "
              "password, so they are not grepped")
    finally:
        provider.stop()


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    static_check(sys.argv[1])
    if not os.environ.get("HERALD_TEST_CONFIG"):
        print("HERALD_TEST_CONFIG is not set: the stack parts are skipped")
        return finish()
    env = Env("security")
    env.token = "tok-SECRET-%032x" % random.getrandbits(128)
    try:
        tls_and_secrets(env, sys.argv[2], sys.argv[3])
    finally:
        env.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
