"""provider_env: what the provider integration tests (test_fcm.py,
test_apns.py) share: Debian's python for the stand-ins in
tests/providers/, a throw-away CA, a stand-in process on a free loopback
port, and the recipients' addresses written to both stores."""
import json
import os
import select
import subprocess
import sys

from badinput_env import Env, check, metric

HERE = os.path.dirname(os.path.abspath(__file__))
PROVIDERS = os.path.join(HERE, "..", "providers")
KEYS = os.path.join(HERE, "..", "unit", "keys")
DEBIAN_PYTHON = "/usr/bin/python3"


def standins_usable():
    """Whether Debian's python has what the stand-ins import."""
    if not os.path.exists(DEBIAN_PYTHON):
        return False
    out = subprocess.run([DEBIAN_PYTHON, "-c", "import jwt, cryptography, h2"],
                         capture_output=True, timeout=30)
    return out.returncode == 0


def make_ca(directory):
    """ca.pem, server.pem and server.key for 127.0.0.1 in DIRECTORY."""
    code = "import sys; sys.path.insert(0, %r); import standin; standin.make_ca(%r)" % (
        PROVIDERS, directory)
    subprocess.run([DEBIAN_PYTHON, "-c", code], check=True, timeout=30)
    return {n: os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key")}


class Standin:
    """tests/providers/SCRIPT over TLS from CA with ARGS, its events
    recorded in ENV's directory, run by PYTHON; killed by stop()."""

    def __init__(self, env, script, ca, args, python=DEBIAN_PYTHON):
        self.record = os.path.join(env.dir, script + ".jsonl")
        log = open(os.path.join(env.dir, script + ".log"), "ab")
        self.proc = subprocess.Popen(
            [python, os.path.join(PROVIDERS, script), "--max-seconds", "170",
             "--record", self.record, "--cert", ca["server.pem"], "--key", ca["server.key"]]
            + args, stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        ready, _, _ = select.select([self.proc.stdout], [], [], 20)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("READY port="):
            self.stop()
            raise AssertionError("%s did not start: %r" % (script, line))
        self.port = int(line.split("=")[1])

    def events(self, name=None):
        if not os.path.exists(self.record):
            return []
        with open(self.record, encoding="utf-8") as f:
            evs = [json.loads(line) for line in f if line.strip()]
        return [e for e in evs if name is None or e["event"] == name]

    def stop(self):
        self.proc.kill()
        self.proc.wait(10)


def smtp_standin(env, ca, password, args=(), **fields):
    """smtp_standin.py over TLS from CA, asking user herald for PASSWORD
    (ARGS: its other options), and the smtp channel that reaches it (the
    password in a file of ENV's directory); FIELDS are the channel's other
    keys.  Returns (the Standin, the channel's dict)."""
    standin = Standin(env, "smtp_standin.py", ca,
                      ["--user", "herald", "--password", password] + list(args))
    pw = os.path.join(env.dir, "smtp-password")
    with open(pw, "w") as f:
        f.write(password + "\n")
    channel = {"type": "smtp", "url": "smtp://127.0.0.1:%d" % standin.port,
               "username": "herald", "password_file": pw, "ca_file": ca["ca.pem"],
               "from": "noreply@herald.test"}
    channel.update(fields)
    return standin, channel


def add_addresses(env, platform, app, tokens):
    """TOKENS ({uid: [address]}) into push_address and the uids' Redis sets,
    as the address book holds them."""
    rows = ",".join("(%d, '%s', '%s', '%s')" % (u, platform, app, t)
                    for u, ts in tokens.items() for t in ts)
    env.sql("INSERT INTO push_address (uid, platform, app, address) VALUES " + rows)
    for u, ts in tokens.items():
        if ts:
            env.r.cmd("SADD", "%saddr:%d" % (env.prefix, u),
                      *["%s %s %s" % (platform, app, t) for t in ts])


def addresses_left(env, uids):
    """(the addresses push_address holds for UIDS, those Redis holds)."""
    lo, hi = min(uids), max(uids)
    mysql = {r[0] for r in env.sql("SELECT address FROM push_address WHERE uid BETWEEN %d "
                                   "AND %d" % (lo, hi))}
    redis = set()
    for u in uids:
        for m in env.r.cmd("SMEMBERS", "%saddr:%d" % (env.prefix, u)) or []:
            redis.add(m.split(" ")[2])
    return mysql, redis


def drop_addresses(env, lo, hi):
    """Deletes the addresses of uids LO..HI and the change rows they logged
    (as Env.drop_users, for the address book's full reloads)."""
    env.sql("DELETE FROM push_address WHERE uid BETWEEN %d AND %d" % (lo, hi))
    env.sql("DELETE FROM push_address_change WHERE uid BETWEEN %d AND %d" % (lo, hi))


def open_env(name, doc, modules="jwt, cryptography, h2"):
    """The Env of provider test NAME, or the exit status when it cannot
    run: 2 with the usage (DOC), 77 without Debian's MODULES."""
    if len(sys.argv) != 3:
        print(doc)
        return 2
    if not standins_usable() or subprocess.run(
            [DEBIAN_PYTHON, "-c", "import " + modules], capture_output=True).returncode != 0:
        print("skipped: Debian's python3 lacks %s" % modules)
        return 77
    return Env(name)


def run_campaign(env, channels, channel, uids, title, body, **cols):
    """Writes the config of CHANNELS, starts a dispatcher and a worker and
    runs one campaign of TITLE / BODY (SQL literals; COLS: more columns of
    the task) to UIDS on CHANNEL to its end.  (dispatcher, worker, task
    id, (sent, failed, unregistered)), or None without kcat."""
    cfg = env.config(channels)
    if not env.create_topic():
        return None
    dsp, wk = env.start_daemons(sys.argv[1], sys.argv[2], cfg)
    t = env.insert_with_subs(channel + "-campaign", channel, uids, title=title, body=body,
                             **cols)
    check(env.wait_state(t, "done", 90), "campaign done (%s)" % (env.task(t),))
    _, sent, failed, unreg = env.task(t, "state, sent, failed, unregistered")
    return dsp, wk, t, (int(sent), int(failed), int(unreg))


def end_campaign(env, wk, dsp, channel, unregistered):
    """The checks every provider campaign ends with: the worker's
    unregistered count for CHANNEL, both daemons stop cleanly."""
    text = env.metrics(env.wk_port)
    check(metric(text, "herald_pushes_total", '{channel="%s",outcome="unregistered"}' % channel)
          == unregistered, "metrics: %s unregistered %d" % (channel, unregistered))
    check(env.stop(wk) == 0, "worker stops cleanly")
    check(env.stop(dsp) == 0, "dispatcher stops cleanly")


def close_env(env, standin, lo, hi):
    """Stops STANDIN, drops the addresses of uids LO..HI, cleans ENV up."""
    if standin is not None:
        standin.stop()
    drop_addresses(env, lo, hi)
    env.cleanup()
