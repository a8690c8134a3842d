"""badinput_env: what the bad-input and security tests share (python3 stdlib).

One Env per test process: its own Redis prefix, Kafka topic and consumer
group, task topic (the dispatcher runs with HERALD_TEST_TASK_TOPIC) and
loopback ports, all derived from the settings of the stack whose config
HERALD_TEST_CONFIG names (its stack.json, through tests/lib/herald_test).
Env.config() writes a complete herald.yaml for these servers with the
channels a test needs; Env.start() runs a daemon with its output in a log
file the test can grep; Env.cleanup() deletes the test's rows and keys.
Backends are reached through herald_test's clients (Redis and MySQL
drivers), kcat for raw Kafka messages.  Every wait is bounded."""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
from herald_test.clients import Mysql, MysqlError, Redis, RedisError  # noqa: E402,F401
from herald_test.procs import free_port, stop_popen, wait_until  # noqa: E402,F401
from herald_test.receiver import PostServer  # noqa: E402,F401
from herald_test.recipients import recipients_yaml  # noqa: E402,F401
from herald_test.sink import sink_argv, sink_times, sink_uids  # noqa: E402,F401
from herald_test.stack import Settings  # noqa: E402,F401

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)
    return cond


def finish():
    """Prints the summary; the process exit status."""
    print("%d failed" % len(FAILS) + ("".join("\n  - " + f for f in FAILS)))
    return 1 if FAILS else 0


def q(s):
    """A YAML double-quoted scalar."""
    return json.dumps(s)


def job_wait(get, answer, timeout_s=100):
    """Follows the job of a 202 ANSWER (POST /v1/tasks/{id}/recover) with
    GET (a function of a path returning (status, JSON)) until it ended:
    (its last record, the phases seen); ({}, phases) when it did not end in
    TIMEOUT_S."""
    phases = []
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        status, j = get("/v1/jobs/%d" % answer["job"])
        if status == 200:
            if j.get("phase") not in phases:
                phases.append(j.get("phase"))
            if j.get("state") not in ("queued", "running"):
                return j, phases
        time.sleep(0.1)
    return {}, phases


class Receiver:
    """An HTTP/1.1 webhook receiver on loopback for the webhook tests: it
    records (path, headers, body, when) of every POST and answers
    ANSWER(path, body) -> (status, body bytes), called under its lock (so
    ANSWER may keep state)."""

    def __init__(self, answer):
        self.records = []
        self.lock = threading.Lock()
        self.answer = answer
        self.http = PostServer(self._post)
        self.port = self.http.port

    def _post(self, req, body):
        with self.lock:
            self.records.append((req.path, dict(req.headers), body, time.time()))
            code, out = self.answer(req.path, body)
        req.send_response(code)
        req.send_header("Content-Length", str(len(out)))
        req.end_headers()
        req.wfile.write(out)

    def url(self, path):
        return "http://127.0.0.1:%d/%s" % (self.port, path)

    def by_path(self, path):
        with self.lock:
            return [r for r in self.records if r[0] == "/" + path]

    def stop(self):
        self.http.stop()


class Raw(str):
    """A channel value Env.config writes into the YAML as it is (quoted by
    the caller: a string that starts with { or [ but is no flow mapping)."""


def require_seams(dispatcher):
    """Exits 77 (skipped, said loudly) unless DISPATCHER carries the test
    seams (HERALD_TEST_TASK_TOPIC): built with -Dtest_seams=true."""
    out = subprocess.run([dispatcher, "--version"], capture_output=True, text=True).stdout
    if "test seams: on" not in out:
        print("SKIPPED: %s lacks the test seams (configure with -Dtest_seams=true)" % dispatcher)
        sys.exit(77)


class Env:
    def __init__(self, name):
        cfg = os.environ.get("HERALD_TEST_CONFIG")
        if not cfg:
            print("HERALD_TEST_CONFIG is not set: skipped")
            sys.exit(77)
        self.stack = Settings.load()
        self.name = name
        self.my = self.stack.mysql
        self.redis_port = self.stack.redis["port"]
        self.brokers = self.stack.brokers
        tag = "%d_%d" % (os.getpid(), random.randrange(1 << 20))
        self.tag = tag
        self.prefix = "hrtest:%s:%s:" % (name, tag)
        self.topic = "%s_%s" % (name, tag)
        self.kafka_topic = "herald.test.%s.%s" % (name, tag)
        self.group = "herald-test-%s-%s" % (name, tag)
        self.dir = tempfile.mkdtemp(prefix="herald-%s-" % name)
        self.r = Redis.of(self.stack)
        self.db = Mysql.of(self.stack)
        self.procs = []
        self.hooks = []  # event webhooks registered by hook_add, deleted by cleanup
        self.dsp_port = free_port()
        self.wk_port = free_port()
        # A dispatcher's probes and /metrics are on a listener of their own:
        # config() gives each dispatcher port (env.dsp_port when it runs)
        # one, and wait_ready() and metrics() look it up (probe()).
        self.probe_ports = {}
        self.token = "tok-%s-%032x" % (name, random.getrandbits(128))

    # ---- backends -----------------------------------------------------------

    def sql(self, query, strict=True):
        """The rows of QUERY; unless STRICT, an error is returned as its text."""
        try:
            return self.db.sql(query)
        except MysqlError as e:
            if strict:
                raise
            return str(e)

    def key(self, task, suffix):
        return "%s{t%d}:%s" % (self.prefix, task, suffix)

    def insert_task(self, name, channel, due="UTC_TIMESTAMP(3) + INTERVAL 2 SECOND", **cols):
        """Inserts a push_task row of this test's topic; COLS values are SQL
        expressions.  Returns the new id."""
        subs = cols.pop("_subs", None)
        cols = dict({"name": "'%s'" % name, "topic": "'%s'" % self.topic,
                     "channel": "'%s'" % channel, "due_at": due}, **cols)
        names = ", ".join(cols)
        values = ", ".join(str(v) for v in cols.values())
        stmt = "BEGIN; INSERT INTO push_task (%s) VALUES (%s); SET @t = LAST_INSERT_ID();" \
            % (names, values)
        if subs:
            stmt += "INSERT INTO push_subscription (task_id, uid) VALUES %s;" % subs
        rows = self.sql(stmt + "COMMIT; SELECT @t;")
        return int(rows[-1][0])

    def insert_with_subs(self, name, channel, uids, due_s=3, **cols):
        """insert_task with its subscribers in the same session, so the
        dispatcher never sees the task without them.  Returns the id."""
        subs = ",".join("(@t,%d)" % u for u in uids)
        return self.insert_task(name, channel,
                                due="UTC_TIMESTAMP(3) + INTERVAL %d SECOND" % due_s,
                                _subs=subs, **cols)

    def task(self, task, cols="state, sent, failed, last_error"):
        rows = self.sql("SELECT %s FROM push_task WHERE id = %d" % (cols, task))
        return rows[0] if rows else None

    def wait_state(self, task, states, timeout_s):
        states = (states,) if isinstance(states, str) else states
        return wait_until(lambda: self.task(task, "state")[0] in states, timeout_s, 0.3)

    def deliveries(self, task):
        """{uid: status} from push_delivery."""
        return {int(u): s for u, s in
                self.sql("SELECT uid, status FROM push_delivery WHERE task_id = %d" % task)}

    def kcat_produce(self, payloads, key=None):
        """Produces each bytes object as one message to the test's topic
        (partition 0, the only one).  Needs kcat."""
        files = []
        for i, p in enumerate(payloads):
            path = os.path.join(self.dir, "msg%d.bin" % i)
            with open(path, "wb") as f:
                f.write(p)
            files.append(path)
        cmd = [shutil.which("kcat") or "kcat", "-P", "-b", self.brokers, "-t", self.kafka_topic,
               "-p", "0", "-X", "message.max.bytes=2000000"]
        if key is not None:
            cmd += ["-k", key]
        out = subprocess.run(cmd + files, capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError("kcat: " + out.stderr)

    def create_topic(self):
        """The broker auto-creates the topic (1 partition) on a metadata
        request; the worker must find it when it subscribes.  Returns False
        (after printing why) without kcat."""
        if shutil.which("kcat") is None:
            print("kcat is not installed (apt-get install kcat): cannot create or feed the "
                  "topic")
            return False
        for _ in range(30):
            out = subprocess.run(["kcat", "-b", self.brokers, "-L", "-t", self.kafka_topic],
                                 capture_output=True, text=True, timeout=30)
            if "with 1 partitions" in out.stdout:
                return True
            time.sleep(0.5)
        print("topic %s not created: %s" % (self.kafka_topic, out.stdout + out.stderr))
        return False

    # ---- config and daemons ---------------------------------------------------

    def config(self, channels, tokens=None, insecure=False, extra_top="", api_extra="",
               worker_extra=(), redis_port=None):
        """Writes a complete herald.yaml; CHANNELS maps a name to a dict of
        channel keys (strings and numbers, emitted as YAML flow values);
        WORKER_EXTRA are more "key: value" lines of the worker section;
        REDIS_PORT a port Redis is reached through instead of the stack's
        (a test's proxy).  Returns its path."""
        tokens = [self.token] if tokens is None else tokens
        redis_port = self.redis_port if redis_port is None else redis_port
        lines = [
            "instance: %s" % q("badinput-" + self.name),
            "log: {level: info, format: logfmt}",
            "mysql: {host: %s, port: %s, user: %s, password: %s, database: %s}"
            % (self.my["host"], self.my["port"], q(self.my["user"]), q(self.my["password"]),
               q(self.my["database"])),
            "redis: %s" % self.stack.redis_flow(self.prefix, redis_port),
            "kafka: {brokers: %s, topic: %s, group: %s, properties: {}}"
            % (q(self.brokers), q(self.kafka_topic), q(self.group)),
            "dispatcher:",
            "  listen: 127.0.0.1:%d" % self.dsp_port,
            "  probe_listen: 127.0.0.1:%d" % self.probe_ports.setdefault(self.dsp_port,
                                                                         free_port()),
            "  api: {tokens: [%s], insecure: %s, max_body_bytes: 65536, max_ids: 1000%s}"
            % (", ".join(q(t) for t in tokens), "true" if insecure else "false", api_extra),
            "  scan_interval_ms: 200",
            "  timer_interval_ms: 50",
            "  poller_interval_ms: 500",
            "  poller_grace_ms: 1000",
            "  sweep_interval_ms: 1000",
            "  redelivery_timeout_s: 20",
            "worker:",
            "  listen: 127.0.0.1:%d" % self.wk_port,
            "  ack_batch: 10",
            "  delivery_log: true",
            "  lease_ms: 20000",
            "  shutdown_grace_ms: 3000",
        ] + ["  " + line for line in worker_extra] + [
            "channels:",
        ]
        for name, keys in channels.items():
            lines.append("  %s:" % name)
            for k, v in keys.items():
                if isinstance(v, bool):
                    v = "true" if v else "false"
                raw = (isinstance(v, (int, Raw)) or v in ("true", "false") or
                       v.startswith(("{", "[")))
                lines.append("    %s: %s" % (k, v if raw else q(v)))
        path = os.path.join(self.dir, "herald-%d.yaml" % random.randrange(1 << 30))
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n" + extra_top)
        return path

    def hooks_config(self, port, hooks_keys):
        """A herald.yaml for herald-hooks alone (no dispatcher or worker
        runs): the events topic is the test's own (kafka_topic), the consumer
        group the test's, the probes on 127.0.0.1:PORT; HOOKS_KEYS are more
        events.hooks keys as YAML flow text ("batch_max: 10, ...").  Returns
        its path."""
        return self.config({"webhook": {"url": "http://127.0.0.1:9/push"}}, extra_top=(
            "events:\n"
            "  enabled: true\n"
            "  topic: %s\n"
            "  hooks: {listen: \"127.0.0.1:%d\", group: \"herald-test-hooks-%s\", %s}\n"
            % (self.kafka_topic, port, self.tag, hooks_keys)))

    def hook_add(self, ctl, cfg, url):
        """Registers URL as an event webhook with heraldctl CTL and config
        CFG (cleanup deletes it and its dead letters); (its id, its secret),
        or None when heraldctl refused (a failed check)."""
        out = subprocess.run([ctl, "-c", cfg, "hooks", "add", url], capture_output=True,
                             text=True, timeout=30)
        words = out.stdout.split()
        if not check(out.returncode == 0 and len(words) == 4,
                     "heraldctl hooks add %s (%s)" % (url, out.stdout + out.stderr)):
            return None
        self.hooks.append(int(words[1]))
        return int(words[1]), words[3]

    def start(self, argv, logname, env=None):
        """Starts a daemon with stdout+stderr in DIR/LOGNAME; returns the Popen."""
        if os.path.basename(argv[0]) == "herald-dispatcher":
            require_seams(argv[0])
        log = open(os.path.join(self.dir, logname), "ab")
        e = dict(os.environ, HERALD_TEST_TASK_TOPIC=self.topic, **(env or {}))
        p = subprocess.Popen(argv, stdout=log, stderr=log, env=e)
        p.logpath = log.name
        log.close()
        self.procs.append(p)
        return p

    def start_sink(self, sink_bin, concurrency=32):
        """Starts herald-sink recording every push; returns (the channel keys
        pointing at it, the record's path) for config() and sink_uids()."""
        port = free_port()
        record = os.path.join(self.dir, "sink.record")
        self.start(sink_argv(sink_bin, port, record), "sink.log")
        return ({"url": "http://127.0.0.1:%d/push" % port, "concurrency": concurrency,
                 "timeout_ms": 5000}, record)

    def start_daemons(self, dispatcher, worker, cfg):
        """Starts a dispatcher and a worker on CFG and checks both serve;
        returns (dispatcher, worker) Popens."""
        dsp = self.start([dispatcher, "-c", cfg], "dispatcher.log")
        wk = self.start([worker, "-c", cfg], "worker.log")
        check(self.wait_ready(self.dsp_port) and self.wait_ready(self.wk_port), "daemons serve")
        return dsp, wk

    def log(self, proc):
        with open(proc.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, proc, timeout_s=15):
        """SIGTERM, then SIGKILL after TIMEOUT_S; returns the exit status."""
        return stop_popen(proc, timeout_s)

    def http(self, method, path, body=None, raw=None, token="default", port=None,
             headers=None):
        """(status, parsed JSON or text); status 0 when the connection failed."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (port or self.dsp_port, path),
                                     data=data, method=method)
        if token == "default":
            token = self.token
        if token is not None:
            req.add_header("Authorization", "Bearer " + token)
        if data is not None or method == "POST":
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                text, status = r.read().decode(errors="replace"), r.status
        except urllib.error.HTTPError as e:
            text, status = e.read().decode(errors="replace"), e.code
        except (urllib.error.URLError, OSError) as e:
            return 0, str(e)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def probe(self, port):
        """The port of the probes and /metrics of the daemon on PORT: a
        dispatcher's probe listener, or PORT itself (a worker's)."""
        return self.probe_ports.get(port, port)

    def metrics(self, port):
        status, text = self.http("GET", "/metrics", token=None, port=self.probe(port))
        return text if status == 200 else ""

    def wait_ready(self, port, timeout_s=20):
        ready = wait_until(
            lambda: self.http("GET", "/healthz", token=None, port=self.probe(port))[0] == 200,
            timeout_s, 0.2)
        if not ready:
            self.say_exited()
        return ready

    def say_exited(self):
        """Prints the last lines of every daemon of this test that has exited,
        so a failed start says why (a port taken, a bad config)."""
        for p in self.procs:
            if p.poll() is None:
                continue
            with open(p.logpath, errors="replace") as f:
                tail = f.readlines()[-5:]
            print("     %s exited with status %d; the end of %s:\n%s"
                  % (os.path.basename(p.args[0]), p.returncode, p.logpath,
                     "".join("       " + line for line in tail)), end="", flush=True)

    def drop_users(self, lo, hi):
        """Deletes the profiles of uids LO..HI, then the change rows their
        writes logged: every later test's dispatcher (a Redis prefix of its
        own, so no synced mark) reloads the profile book in full, which
        rewrites every uid of the change rows kept for a week."""
        self.sql("DELETE FROM push_user WHERE uid BETWEEN %d AND %d" % (lo, hi))
        self.sql("DELETE FROM push_user_change WHERE uid BETWEEN %d AND %d" % (lo, hi))

    def cleanup(self):
        for p in self.procs:
            self.stop(p)
        self.r.unlink_pattern(self.prefix + "*")
        for hook in self.hooks:
            self.sql("DELETE FROM push_hook_dead WHERE hook_id = %d" % hook)
            self.sql("DELETE FROM push_hook WHERE id = %d" % hook)
        # A literal id list: MariaDB runs DELETE ... IN (SELECT ...) as a
        # scan of the whole table, which a benchmark's millions of rows make slow.
        ids = ",".join(r[0] for r in self.sql("SELECT id FROM push_task WHERE topic = '%s'"
                                              % self.topic)) or "0"
        for t in ("push_subscription", "push_delivery", "push_chunk", "push_task_shard",
                  "push_engagement", "push_task_series", "push_task_variant",
                  "push_task_variant_count"):
            self.sql("DELETE FROM %s WHERE task_id IN (%s)" % (t, ids))
        sids = ",".join(r[0] for r in self.sql("SELECT id FROM push_series WHERE topic = '%s'"
                                               % self.topic)) or "0"
        self.sql("DELETE FROM push_series_variant WHERE series_id IN (%s)" % sids)
        self.sql("DELETE FROM push_task WHERE topic = '%s'" % self.topic)
        if not FAILS:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            print("logs kept in " + self.dir)


def wall(ts):
    """TS (epoch s) as a UTC 'YYYY-MM-DD HH:MM:SS.mmm' for SQL."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + ".%03d" % (int(ts * 1000) % 1000)


def hms(ts):
    """HH:MM:SS of epoch seconds TS in UTC (a quiet hours' or window's bound)."""
    return time.strftime("%H:%M:%S", time.gmtime(ts))


def metric(text, name, labels=""):
    """The value of one sample of a Prometheus text exposition, or None."""
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None
