"""herald_test.clients: Redis and MySQL through Debian's drivers
(python3-redis, python3-pymysql), and heraldctl.

Redis.cmd() returns replies as Redis sends them (a flat list for HGETALL,
[cursor, keys] for SCAN), strings unless raw=True, from one node or, when
the stack's stack.json says cluster, a Redis Cluster.  Mysql.sql() returns rows
as lists of strings, like `mariadb -N -B` printed them: NULL is "NULL".  Each
sql() call is its own session, so one Mysql may be shared by threads."""
import logging
import subprocess

import herald_test  # noqa: F401  (Debian's dist-packages on sys.path)

import pymysql
import redis

RedisError = redis.RedisError
SQL_TIMEOUT_S = 120
REDIS_TIMEOUT_S = 60
# What a cluster client needs parsed for itself (its topology and command
# table); every other reply stays as Redis sent it.
CLUSTER_OWN_REPLIES = ("INFO", "COMMAND", "CLUSTER", "ASKING", "READONLY", "READWRITE")


def _raw_replies(client):
    """No reply post-processing on CLIENT (a redis.Redis)."""
    client.response_callbacks = {k: v for k, v in client.response_callbacks.items()
                                 if k.split(" ")[0].upper() in CLUSTER_OWN_REPLIES}


def _cluster(nodes, **kw):
    """A redis.cluster.RedisCluster seeded with every node of NODES ((host,
    port) pairs), whose per-node connections, those of nodes it finds later
    too (a failover), hand replies over unparsed."""
    from redis.cluster import ClusterNode, RedisCluster
    # It logs every MOVED and failed node it then handles with a traceback;
    # what it cannot handle still reaches the caller as an exception.
    logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)
    c = RedisCluster(startup_nodes=[ClusterNode(h, int(p)) for h, p in nodes], **kw)
    manager = c.nodes_manager
    make = manager.create_redis_node

    def create_redis_node(host, port, **kwargs):
        node = make(host, port, **kwargs)
        _raw_replies(node)
        return node
    manager.create_redis_node = create_redis_node
    for node in list(manager.nodes_cache.values()) + list(manager.startup_nodes.values()):
        if node.redis_connection is not None:
            _raw_replies(node.redis_connection)
    return c


class Redis:
    """One Redis node (redis.Redis), or a Redis Cluster (NODES given:
    redis.cluster.RedisCluster, which routes each command by its key's slot
    and follows MOVED and failovers).  On a cluster a command's keys must
    share a slot (one task's keys do: the {t<ID>} tag); scan() and
    unlink_many() handle keys of every slot."""

    def __init__(self, host, port, password=None, nodes=None):
        kw = dict(password=password or None, socket_timeout=REDIS_TIMEOUT_S,
                  socket_connect_timeout=10)
        self.cluster = bool(nodes)
        if self.cluster:
            self.text = _cluster(nodes, decode_responses=True, **kw)
            self.bytes = _cluster(nodes, **kw)
            return
        kw.update(host=host, port=int(port))
        self.text = redis.Redis(decode_responses=True, **kw)
        self.bytes = redis.Redis(**kw)
        # No reply post-processing: tests compare what Redis answered.
        for c in (self.text, self.bytes):
            c.response_callbacks = {}

    @classmethod
    def of(cls, settings):
        r = settings.redis
        nodes = None
        if r.get("cluster"):
            nodes = [(r["host"], n["port"]) for n in r["nodes"]]
        return cls(r["host"], r["port"], r.get("password"), nodes)

    def cmd(self, *args, raw=False):
        return (self.bytes if raw else self.text).execute_command(*args)

    def masters(self):
        """A redis.Redis for each master (the one node when not a cluster)."""
        if not self.cluster:
            return [self.text]
        return [n.redis_connection for n in self.text.get_primaries()]

    def scan(self, pattern, count=1000):
        """Every key matching PATTERN (SCAN until the cursor is back at 0, on
        every master of a cluster)."""
        keys = []
        for node in self.masters():
            cursor = "0"
            while True:
                cursor, batch = node.execute_command("SCAN", cursor, "MATCH", pattern, "COUNT",
                                                     count)
                keys += batch
                if cursor == "0":
                    break
        return keys

    def unlink_many(self, keys, batch=1000):
        """UNLINKs KEYS in pipelined batches (on a cluster, one UNLINK per
        hash slot, which is all one command may touch); how many there
        were."""
        keys = list(keys)
        groups = [keys]
        if self.cluster:
            by_slot = {}
            for k in keys:
                by_slot.setdefault(self.text.keyslot(k), []).append(k)
            groups = list(by_slot.values())
        pipe = self.text.pipeline(transaction=False)
        for group in groups:
            for i in range(0, len(group), batch):
                pipe.execute_command("UNLINK", *group[i:i + batch])
        pipe.execute()
        return len(keys)

    def unlink_pattern(self, pattern):
        return self.unlink_many(self.scan(pattern))

    def close(self):
        self.text.close()
        self.bytes.close()


class MysqlError(RuntimeError):
    pass


def _cell(v):
    if v is None:
        return "NULL"
    return v.decode(errors="replace") if isinstance(v, (bytes, bytearray)) else v


class Mysql:
    def __init__(self, host, port, user, password, database):
        self.kw = dict(host=host, port=int(port), user=user, password=password,
                       database=database, connect_timeout=10, read_timeout=SQL_TIMEOUT_S,
                       write_timeout=SQL_TIMEOUT_S, autocommit=True,
                       client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS,
                       conv={})   # no conversions: every value as the server wrote it

    @classmethod
    def of(cls, settings):
        m = settings.mysql
        return cls(m["host"], m["port"], m["user"], m["password"], m["database"])

    def sql(self, query):
        """Runs QUERY (one or more statements) in a session of its own; the
        rows of the last statement that returned any."""
        try:
            conn = pymysql.connect(**self.kw)
        except pymysql.MySQLError as e:
            raise MysqlError("connect: %s" % (e,)) from None
        try:
            with conn.cursor() as cur:
                cur.execute(query)
                rows = []
                while True:
                    if cur.description is not None:
                        rows = [[_cell(v) for v in r] for r in cur.fetchall()]
                    if not cur.nextset():
                        break
                return rows
        except pymysql.MySQLError as e:
            code, msg = (e.args + (None, None))[:2]
            raise MysqlError("ERROR %s: %s" % (code, msg)) from None
        finally:
            conn.close()


def heraldctl(binary, config, *args, stdin=None, timeout_s=120, check=False):
    """Runs BINARY -c CONFIG ARGS...; the CompletedProcess (text)."""
    return subprocess.run([binary, "-c", config] + [str(a) for a in args], input=stdin,
                          capture_output=True, text=True, timeout=timeout_s, check=check)
