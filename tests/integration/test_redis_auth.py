#!/usr/bin/env python3
"""Redis AUTH (issue 9 item 4).

Starts a private redis-server on a free loopback port with requirepass set
to a distinctive secret (config file in a temp dir, mode 0600, so the
secret is not on a command line; --save '' and no AOF), and a herald.yaml
derived from $HERALD_TEST_CONFIG (badinput_env.Env: the stack's MySQL and
Kafka, this test's own topic and prefix) whose redis section points at it
with password "${HERALD_TEST_REDIS_PASSWORD}", the way a Kubernetes Secret
supplies it through the environment.  Checks:

1. the config file itself never holds the secret;
2. heraldctl status and pause work with the right password (status shows
   a count only the private Redis holds);
3. with a wrong password, and with none, pause fails and status reports
   (it still shows the MySQL half) with one clear stderr line that names
   AUTH / NOAUTH and holds neither password;
4. a dispatcher started with the right password becomes ready and serves
   the live half of GET /v1/tasks/{id} from the private Redis; one started
   with a wrong password never becomes ready;
5. the secret (and the wrong password) appear in no log and no /metrics.

usage: test_redis_auth.py HERALD_DISPATCHER HERALDCTL"""
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import (FAILS, Env, Redis, RedisError, check, finish, free_port,  # noqa: E402
                          stop_popen, wait_until)

PASSWORD_VAR = "HERALD_TEST_REDIS_PASSWORD"


def start_redis(tmp, port, secret):
    """A private redis-server requiring SECRET; returns the Popen once it
    answers, or None after printing why."""
    conf = os.path.join(tmp, "redis.conf")
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("bind 127.0.0.1\nport %d\nrequirepass %s\nsave \"\"\nappendonly no\n"
                "dir %s\nlogfile %s\ndaemonize no\n"
                % (port, secret, tmp, os.path.join(tmp, "redis.log")))
    proc = subprocess.Popen([shutil.which("redis-server"), conf], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def answers():
        try:
            r = Redis("127.0.0.1", port, secret)
            try:
                return r.cmd("PING") == "PONG"
            finally:
                r.close()
        except RedisError:
            return False

    if not wait_until(answers, 10, 0.1):
        print("redis-server on port %d did not come up" % port)
        proc.kill()
        proc.wait(timeout=10)
        return None
    return proc


def ctl(heraldctl, cfg, password, *args):
    env = dict(os.environ)
    env.pop("HERALD_CONFIG", None)
    if password is None:
        env.pop(PASSWORD_VAR, None)
    else:
        env[PASSWORD_VAR] = password
    return subprocess.run([heraldctl, "-c", cfg] + list(args), capture_output=True, text=True,
                          timeout=30, env=env)


def check_ctl(env, heraldctl, cfg, secret, wrong, task):
    """status shows the MySQL half even when Redis refuses (by design, rc 0,
    the Redis error on stderr); pause needs Redis and must fail."""
    for label, pw, want in (("a wrong password", wrong, "AUTH"),
                            ("an empty password", "", "NOAUTH")):
        for cmd in ("status", "pause"):
            out = ctl(heraldctl, cfg, pw, cmd, str(task))
            err = out.stderr.strip()
            check((cmd == "status" or out.returncode != 0) and len(err.splitlines()) == 1 and
                  want in err,
                  "heraldctl %s with %s: one stderr line naming %s (rc=%d: %r)"
                  % (cmd, label, want, out.returncode, err[:200]))
            check(secret not in out.stdout + out.stderr and
                  (not pw or pw not in out.stdout + out.stderr),
                  "heraldctl %s's output with %s holds no password" % (cmd, label))
    check(env.task(task, "control")[0] == "run", "the refused pause changed nothing")
    out = ctl(heraldctl, cfg, secret, "status", str(task))
    # The live half of status: SCARD subs and the stats hash (progress counts
    # MySQL's subscriptions, which this task has none of).
    check(out.returncode == 0 and "subs left 3 " in out.stdout and "published=4242" in out.stdout
          and out.stderr.strip() == "",
          "heraldctl status with the right password reads the private Redis (rc=%d: %s)"
          % (out.returncode, (out.stdout + out.stderr).strip()[:200]))
    out = ctl(heraldctl, cfg, secret, "pause", str(task))
    check(out.returncode == 0 and env.task(task, "control")[0] == "pause",
          "heraldctl pause with the right password works (rc=%d: %s)"
          % (out.returncode, (out.stdout + out.stderr).strip()[:200]))


def dispatcher_port(env, proc, event="api_started"):
    """The port from the dispatcher's EVENT line (api_started: the API;
    probes_started: /readyz and /metrics; both listen on :0)."""
    m = [None]

    def started():
        m[0] = re.search(r"%s.*\bport=(\d+)" % event, env.log(proc))
        return m[0] is not None or proc.poll() is not None

    wait_until(started, 20, 0.2)
    return int(m[0].group(1)) if m[0] else None


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    dispatcher, heraldctl = sys.argv[1:]
    env = Env("redisauth")
    if shutil.which("redis-server") is None:
        print("redis-server is not installed: skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="herald-redisauth-server-")
    secret = "hr-redis-secret-%016x" % random.randrange(1 << 64)
    wrong = "hr-wrong-secret-%016x" % random.randrange(1 << 64)
    port = free_port()
    redis = None
    try:
        redis = start_redis(tmp, port, secret)
        if not check(redis is not None, "private redis-server with requirepass started"):
            return finish()
        cfg = env.config({"ok": {"url": "http://127.0.0.1:9/push"}})
        with open(cfg) as f:
            text = f.read()
        text, n = re.subn(r"^redis: \{.*\}$",
                          "redis: {host: 127.0.0.1, port: %d, password: \"${%s}\", prefix: \"%s\"}"
                          % (port, PASSWORD_VAR, env.prefix),
                          text, flags=re.M)
        text = re.sub(r"^  (probe_)?listen: 127\.0\.0\.1:(%d|%d)$"
                      % (env.dsp_port, env.probe(env.dsp_port)), r"  \1listen: 127.0.0.1:0",
                      text, flags=re.M)
        with open(cfg, "w") as f:
            f.write(text)
        check(n == 1 and secret not in text, "the config names ${%s}, not the secret"
              % PASSWORD_VAR)

        # A task of this test's topic with live state only the private Redis has.
        task = env.insert_task("redisauth", "ok", due="UTC_TIMESTAMP(3) + INTERVAL 1 DAY")
        r = Redis("127.0.0.1", port, secret)
        r.cmd("HSET", env.key(task, "stats"), "published", "4242")
        r.cmd("SADD", env.key(task, "subs"), "1", "2", "3")
        r.close()
        check_ctl(env, heraldctl, cfg, secret, wrong, task)

        # The dispatcher: right password -> ready and the API reads the private Redis.
        good = env.start([dispatcher, "-c", cfg], "dispatcher-good.log", {PASSWORD_VAR: secret})
        dport = dispatcher_port(env, good)
        dprobe = dispatcher_port(env, good, "probes_started")
        ready = dprobe is not None and wait_until(
            lambda: env.http("GET", "/readyz", token=None, port=dprobe)[0] == 200, 20, 0.2)
        check(ready, "dispatcher with the right password becomes ready (port %s)" % dport)
        status, body = env.http("GET", "/v1/tasks/%d" % task, port=dport) if dport else (0, "")
        live = body.get("live", {}) if isinstance(body, dict) else {}
        check(status == 200 and live.get("subs") == 3 and
              live.get("stats", {}).get("published") == 4242,
              "GET /v1/tasks/{id} reads live state from the private Redis (%d %s)"
              % (status, str(body)[:200]))
        metrics = env.metrics(dprobe) if dprobe else ""
        check("herald_" in metrics, "dispatcher /metrics answers")

        # Wrong password: never ready; the reason is logged without the password.
        bad = env.start([dispatcher, "-c", cfg], "dispatcher-bad.log", {PASSWORD_VAR: wrong})
        bport = dispatcher_port(env, bad, "probes_started")
        if bport is not None:
            became_ready = wait_until(
                lambda: env.http("GET", "/readyz", token=None, port=bport)[0] == 200, 3, 0.2)
            check(not became_ready, "dispatcher with a wrong password does not become ready")
            bad_metrics = env.metrics(bport)
        else:
            check(bad.poll() is not None, "dispatcher with a wrong password exits or serves")
            bad_metrics = ""
        env.stop(bad)
        env.stop(good)
        bad_log = env.log(bad)
        check("AUTH" in bad_log, "the wrong-password dispatcher logs the AUTH failure")

        logs = env.log(good) + bad_log
        for label, text in (("logs", logs), ("/metrics", metrics + bad_metrics)):
            check(secret not in text and wrong not in text,
                  "no password in the dispatchers' %s" % label)
    finally:
        if redis is not None:
            stop_popen(redis, 10)
        env.cleanup()
        if not FAILS:
            shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
