#!/usr/bin/env python3
"""A real Prometheus scrapes a live campaign (issue 15).

Debian's prometheus (2.42) on 127.0.0.1 scrapes 1 herald-dispatcher and 2
herald-workers every second, with deploy/prometheus/herald-rules.yaml loaded,
while they push a campaign to herald-sink (test_control_e2e's harness):

  1. Prometheus is ready and finds the 3 targets up (job herald-dispatcher,
     herald-worker, as the ServiceMonitors name them);
  2. after the campaign, its query API answers
     sum(herald_pushes_total{outcome="sent"}) = the sink's count of 2xx pushes
     (= every uid of the warm-up and the campaign), and
     sum(herald_chunks_published_total) = sum(herald_chunks_acked_total);
  3. every alerting rule evaluated against the real series without error,
     none firing.

usage: test_prometheus_scrape.py HERALD_DISPATCHER HERALD_WORKER HERALD_SINK HERALDCTL
(exit 77 without HERALD_TEST_CONFIG or without prometheus).  Every wait is
bounded; Prometheus and the daemons are stopped on every way out."""
import json
import os
import shutil
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badinput_env import Env, check, finish, free_port, wait_until  # noqa: E402
from test_control_e2e import E2E  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(REPO, "deploy", "prometheus", "herald-rules.yaml")
N = 20000


class Prometheus:
    def __init__(self, env, e2e):
        self.port = free_port()
        cfg = os.path.join(env.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
                    "rule_files: [%s]\n"
                    "scrape_configs:\n"
                    "  - job_name: herald-dispatcher\n"
                    "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
                    "  - job_name: herald-worker\n"
                    "    static_configs: [{targets: [%s]}]\n"
                    % (json.dumps(RULES), env.probe(env.dsp_port),
                       ", ".join("'127.0.0.1:%d'" % p for p in e2e.wk_ports)))
        self.proc = env.start(["prometheus", "--config.file=" + cfg,
                               "--storage.tsdb.path=" + os.path.join(env.dir, "tsdb"),
                               "--web.listen-address=127.0.0.1:%d" % self.port,
                               "--log.level=warn"], "prometheus.log")

    def get(self, path, **params):
        url = "http://127.0.0.1:%d%s" % (self.port, path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, r.read().decode()
        except OSError as ex:
            return 0, str(ex)

    def api(self, path, **params):
        status, text = self.get("/api/v1/" + path, **params)
        if status != 200:
            return None
        j = json.loads(text)
        return j["data"] if j.get("status") == "success" else None

    def scalar(self, query):
        """The single value of an instant query, or None."""
        data = self.api("query", query=query)
        if not data or len(data["result"]) != 1:
            return None
        return float(data["result"][0]["value"][1])


def sink_sent(record):
    """Pushes the sink answered with a 2xx."""
    n = 0
    with open(record) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[1].startswith("2"):
                n += 1
    return n


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    if not os.environ.get("HERALD_TEST_CONFIG"):
        print("HERALD_TEST_CONFIG is not set: skipped")
        return 77
    if shutil.which("prometheus") is None:
        print("prometheus is not installed (apt-get install prometheus): skipped")
        return 77
    env = Env("promscrape")
    e = E2E(env, sys.argv[1:5])
    try:
        if not e.create_topic() or not e.start():
            return finish()
        prom = Prometheus(env, e)
        ok = wait_until(lambda: prom.get("/-/ready")[0] == 200, 30, 0.2)
        if not check(ok, "prometheus ready on 127.0.0.1:%d" % prom.port):
            print(env.log(prom.proc)[-2000:])
            return finish()

        def targets_up():
            data = prom.api("query", query="up")
            return data is not None and sorted(
                (r["metric"]["job"], r["value"][1]) for r in data["result"]) == [
                ("herald-dispatcher", "1"), ("herald-worker", "1"), ("herald-worker", "1")]
        check(wait_until(targets_up, 30, 0.5),
              "prometheus scrapes the dispatcher and 2 workers, all up (%s)"
              % prom.api("query", query="up"))

        t0 = time.time()
        t = e.task("scrape", 3 + N // 20000, N, range(100001, 100001 + N))
        done = env.wait_state(t, "done", 120)
        check(done, "campaign of %d done in %.1f s (%s)" % (N, time.time() - t0, e.counters(t)))

        # The sink writes its record from per-thread buffers every 100 ms:
        # the last answers reach the file up to a tick after the task is done.
        wait_until(lambda: sink_sent(e.record) >= N + 100, 5, 0.1)
        sent = sink_sent(e.record)
        check(sent == N + 100, "the sink answered 2xx to %d pushes (warm-up 100 + %d)" % (sent, N))
        q = 'sum(herald_pushes_total{outcome="sent"})'
        ok = wait_until(lambda: prom.scalar(q) == sent, 20, 0.5)
        check(ok, "prometheus: %s = %s, the sink's count %d" % (q, prom.scalar(q), sent))
        pub, acked = "sum(herald_chunks_published_total)", "sum(herald_chunks_acked_total)"
        ok = wait_until(lambda: prom.scalar(pub) is not None and prom.scalar(pub) == prom.scalar(acked)
                        and prom.scalar(pub) > 0, 20, 0.5)
        check(ok, "prometheus: %s = %s = %s" % (pub, prom.scalar(pub), prom.scalar(acked)))

        rules = prom.api("rules") or {"groups": []}
        rs = [r for g in rules["groups"] for r in g["rules"]]
        bad = ["%s: %s" % (r["name"], r.get("lastError")) for r in rs if r.get("health") != "ok"]
        firing = [r["name"] for r in rs if r.get("state") == "firing"]
        check(len(rs) >= 19 and not bad, "%d alerting rules loaded and evaluated without error %s"
              % (len(rs), bad or ""))
        check(not firing, "no alert firing after a clean campaign %s" % (firing or ""))
    finally:
        env.cleanup()
        e.kafka_topics("--delete", "--topic", env.kafka_topic)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
