"""Unit tests of tests/lib/herald_test that need no stack: settings, ports,
waits, processes, the sink record.  Run: python3 tests/lib/test_herald_test.py"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from herald_test import procs  # noqa: E402
from herald_test.receiver import PostServer  # noqa: E402
from herald_test.recipients import recipients_yaml  # noqa: E402
from herald_test.sink import sink_times, sink_uids  # noqa: E402
from herald_test.stack import Settings, StackMissing  # noqa: E402


class TestStack(unittest.TestCase):
    def test_load(self):
        with tempfile.TemporaryDirectory() as d:
            pid_file = os.path.join(d, "redis.pid")
            with open(pid_file, "w") as f:
                f.write("%d\n" % os.getpid())
            with open(os.path.join(d, "stack.json"), "w") as f:
                json.dump({"offset": 7, "config": os.path.join(d, "herald.yaml"),
                           "redis": {"host": "127.0.0.1", "port": 1, "pid_file": pid_file},
                           "mysql": {"pid_file": os.path.join(d, "none.pid")},
                           "kafka": {"brokers": "127.0.0.1:2", "pid_file": pid_file}}, f)
            s = Settings.load(d)
            self.assertEqual(s.offset, 7)
            self.assertEqual(s.brokers, "127.0.0.1:2")
            self.assertEqual(s.redis["port"], 1)
            self.assertEqual(s.pids(), {"redis": os.getpid(), "kafka": os.getpid()})
            self.assertFalse(s.redis_cluster)
            self.assertEqual(s.redis_flow("p:", 9),
                             '{host: 127.0.0.1, port: 9, password: "", prefix: "p:"}')

    def test_three_brokers(self):
        # stack up --kafka-brokers 3: one pid per node, named as stop-one
        # names them; a node without its pid file is left out.
        with tempfile.TemporaryDirectory() as d:
            pid_file = os.path.join(d, "kafka1.pid")
            with open(pid_file, "w") as f:
                f.write("%d\n" % os.getpid())
            nodes = [{"name": "kafka1", "id": 1, "port": 2, "pid_file": pid_file},
                     {"name": "kafka2", "id": 2, "port": 4,
                      "pid_file": os.path.join(d, "kafka2.pid")}]
            with open(os.path.join(d, "stack.json"), "w") as f:
                json.dump({"redis": {"pid_file": os.path.join(d, "none.pid")},
                           "mysql": {"pid_file": os.path.join(d, "none.pid")},
                           "kafka": {"brokers": "127.0.0.1:2,127.0.0.1:4", "pid_file": pid_file,
                                     "nodes": nodes}}, f)
            self.assertEqual(Settings.load(d).pids(), {"kafka1": os.getpid()})

    def test_redis_cluster(self):
        # stack up --redis-cluster: one pid per node, redis1..redis6.
        with tempfile.TemporaryDirectory() as d:
            pid_file = os.path.join(d, "redis2.pid")
            with open(pid_file, "w") as f:
                f.write("%d\n" % os.getpid())
            nodes = [{"name": "redis%d" % i, "port": 10 + i, "bus_port": 110 + i,
                      "pid_file": os.path.join(d, "redis%d.pid" % i)} for i in range(1, 7)]
            with open(os.path.join(d, "stack.json"), "w") as f:
                json.dump({"redis": {"host": "127.0.0.1", "port": 11, "cluster": True,
                                     "pid_file": nodes[0]["pid_file"], "nodes": nodes},
                           "mysql": {"pid_file": os.path.join(d, "none.pid")},
                           "kafka": {"brokers": "127.0.0.1:2",
                                     "pid_file": os.path.join(d, "none.pid")}}, f)
            s = Settings.load(d)
            self.assertTrue(s.redis_cluster)
            self.assertEqual(s.pids(), {"redis2": os.getpid()})
            flow = s.redis_flow("p:")
            self.assertTrue(flow.startswith('{host: 127.0.0.1, port: 11, password: "", '
                                            'prefix: "p:", cluster: true, nodes: ["127.0.0.1:11", '))
            self.assertTrue(flow.endswith('"127.0.0.1:16"]}'))

    def test_missing(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(StackMissing):
                Settings.load(d)


class TestPorts(unittest.TestCase):
    def test_free_port_and_open(self):
        port = procs.free_port()
        self.assertFalse(procs.port_open(port))
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen(1)
            self.assertTrue(procs.port_open(port))

    def test_free_port_never_twice(self):
        # bind(0) alone repeats about 13 ports in 600 calls (procs.py's
        # comment); the claims hold across processes too.
        ports = [procs.free_port() for _ in range(300)]
        ports += [int(p) for p in subprocess.run(
            [sys.executable, procs.__file__, "300"], capture_output=True, text=True,
            check=True).stdout.split()]
        self.assertEqual(len(set(ports)), 600)

    def test_wait_until_bounded(self):
        t0 = time.monotonic()
        self.assertFalse(procs.wait_until(lambda: False, 0.3, 0.05))
        self.assertLess(time.monotonic() - t0, 2)
        self.assertTrue(procs.wait_until(lambda: True, 0))


class TestProc(unittest.TestCase):
    def test_log_and_sigterm(self):
        with tempfile.TemporaryDirectory() as d:
            p = procs.Proc("echo", ["sh", "-c", "echo event=hello x=1; exec sleep 30"],
                           os.path.join(d, "p.log")).start()
            self.assertTrue(procs.wait_until(lambda: p.log_has("hello"), 10, 0.05))
            self.assertTrue(p.alive())
            self.assertEqual(p.stop(5), -15)
            self.assertFalse(p.alive())
            self.assertIn("event=hello", p.tail(1))

    def test_sigkill_after_timeout(self):
        with tempfile.TemporaryDirectory() as d:
            killed = []
            p = procs.Proc("stubborn", ["sh", "-c", "trap '' TERM; echo ready; "
                                        "while :; do sleep 0.1; done"],
                           os.path.join(d, "p.log")).start()
            self.assertTrue(procs.wait_until(lambda: "ready" in p.text(), 10, 0.05))
            self.assertEqual(p.stop(0.5, lambda: killed.append(1)), -9)
            self.assertEqual(killed, [1])

    def test_restart_appends(self):
        with tempfile.TemporaryDirectory() as d:
            p = procs.Proc("twice", ["sh", "-c", "echo run"], os.path.join(d, "p.log"))
            p.start().p.wait(10)
            p.start().p.wait(10)
            self.assertEqual((p.starts, p.text()), (2, "run\nrun\n"))
            self.assertEqual(p.log_start, 4)


class TestSink(unittest.TestCase):
    def test_sink_uids(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "record")
            with open(path, "w") as f:
                f.write("1 200 5\n2 500 6\n3 204 7\n1 200 8\nbad\n")
            self.assertEqual(sink_uids(path), {1, 3})
            self.assertEqual(sink_uids(os.path.join(d, "none")), set())

    def test_sink_times(self):
        # the first 2xx answer's time per uid; failures and short lines skipped
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "record")
            with open(path, "w") as f:
                f.write("1 500 4\n1 200 5\n2 204 6\n1 200 8\n3 200\nbad\n")
            self.assertEqual(sink_times(path), {1: 5, 2: 6})
            self.assertEqual(sink_times(os.path.join(d, "none")), {})


class TestPostServer(unittest.TestCase):
    def test_post_answered(self):
        got = []

        def post(req, body):
            got.append((req.path, body))
            req.send_response(202)
            req.send_header("Content-Length", "2")
            req.end_headers()
            req.wfile.write(b"ok")

        srv = PostServer(post, queue=8)
        try:
            req = urllib.request.Request("http://127.0.0.1:%d/push" % srv.port, data=b"uid=7",
                                         method="POST")
            with urllib.request.urlopen(req, timeout=5) as r:
                self.assertEqual((r.status, r.read()), (202, b"ok"))
            self.assertEqual(got, [("/push", b"uid=7")])
            self.assertEqual(srv.server.request_queue_size, 8)
        finally:
            srv.stop()


class TestRecipients(unittest.TestCase):
    def test_yaml(self):
        self.assertEqual(
            recipients_yaml([("k2", "s2"), ("k1", "s1")], token_ttl_s=3600,
                            attributes_max_bytes=512),
            "recipients:\n  categories:\n    - {name: reminder}\n    - {name: marketing}\n"
            "    - {name: security, mandatory: true}\n  attributes_max_bytes: 512\n"
            "  unsubscribe:\n    public_url: https://herald.test\n    token_ttl_s: 3600\n"
            "    keys:\n      - {id: k2, secret: \"s2\"}\n      - {id: k1, secret: \"s1\"}\n")
        plain = recipients_yaml([("p1", "s")])
        self.assertNotIn("token_ttl_s", plain)
        self.assertNotIn("attributes_max_bytes", plain)
        self.assertTrue(plain.endswith('    keys:\n      - {id: p1, secret: "s"}\n'))


if __name__ == "__main__":
    unittest.main()
