"""herald_test.stack: the local stack's settings from its stack.json.

`deploy/local/stack up` writes HERALD_HOME/stack.json (ports, hosts,
passwords, config path, data directories, port offset; its header comment
lists the fields).  Settings finds it from, in order: an explicit home, the
directory of HERALD_TEST_CONFIG (what scripts/test exports), HERALD_HOME,
<repo>/.herald."""
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class StackMissing(Exception):
    """No stack.json where the settings were looked for (the stack is not up)."""


def home_dir(home=None):
    if home:
        return home
    cfg = os.environ.get("HERALD_TEST_CONFIG")
    if cfg:
        return os.path.dirname(os.path.abspath(cfg))
    return os.environ.get("HERALD_HOME") or os.path.join(REPO, ".herald")


class Settings:
    """The fields of stack.json as attributes (redis, mysql, kafka, ... are
    dicts), plus the shortcuts tests use most."""

    def __init__(self, data):
        self.data = data
        for k, v in data.items():
            setattr(self, k, v)

    @classmethod
    def load(cls, home=None):
        path = os.path.join(home_dir(home), "stack.json")
        try:
            with open(path) as f:
                return cls(json.load(f))
        except FileNotFoundError:
            raise StackMissing("%s does not exist: is the stack up "
                               "(deploy/local/stack up)?" % path) from None

    @property
    def brokers(self):
        return self.kafka["brokers"]

    @property
    def redis_cluster(self):
        """Whether the stack's Redis is a Redis Cluster (stack up --redis-cluster)."""
        return bool(self.redis.get("cluster"))

    def redis_seeds(self):
        """["host:port", ...] of every Redis node (one on a single node)."""
        nodes = self.redis.get("nodes") or [{"port": self.redis["port"]}]
        return ["%s:%d" % (self.redis["host"], n["port"]) for n in nodes]

    def redis_flow(self, prefix, port=None):
        """herald.yaml's redis mapping for this stack as one line of YAML
        flow text, with key prefix PREFIX: host, port (PORT instead of the
        first node's: a proxy in front of a single node), no password, and
        on a Redis Cluster `cluster: true` and every node as a seed."""
        text = "{host: %s, port: %d, password: \"\", prefix: %s" % (
            self.redis["host"], port or self.redis["port"], json.dumps(prefix))
        if self.redis_cluster:
            text += ", cluster: true, nodes: [%s]" % ", ".join(
                '"%s"' % s for s in self.redis_seeds())
        return text + "}"

    def pids(self):
        """{server: pid} of the stack's servers from their pid files, named
        as `deploy/local/stack stop-one` names them (kafka1..kafka3 on a
        stack of three brokers, redis1..redis6 on a Redis Cluster)."""
        files = [(n["name"], n["pid_file"]) for n in self.redis.get("nodes", [])] or \
            [("redis", self.redis["pid_file"])]
        files += [("mariadb", self.mysql["pid_file"])]
        files += [(n["name"], n["pid_file"]) for n in self.kafka.get("nodes", [])] or \
            [("kafka", self.kafka["pid_file"])]
        out = {}
        for name, path in files:
            try:
                with open(path) as f:
                    out[name] = int(f.read().strip())
            except (OSError, ValueError):
                pass
        return out
