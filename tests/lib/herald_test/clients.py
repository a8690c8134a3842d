"""herald_test.clients: Redis and MySQL through Debian's drivers
(python3-redis, python3-pymysql), and heraldctl.

Redis.cmd() returns replies as Redis sends them (a flat list for HGETALL,
[cursor, keys] for SCAN), strings unless raw=True.  Mysql.sql() returns rows
as lists of strings, like `mariadb -N -B` printed them: NULL is "NULL".  Each
sql() call is its own session, so one Mysql may be shared by threads."""
import subprocess

import herald_test  # noqa: F401  (Debian's dist-packages on sys.path)

import pymysql
import redis

RedisError = redis.RedisError
SQL_TIMEOUT_S = 120
REDIS_TIMEOUT_S = 60


class Redis:
    def __init__(self, host, port, password=None):
        kw = dict(host=host, port=int(port), password=password or None,
                  socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=10)
        self.text = redis.Redis(decode_responses=True, **kw)
        self.bytes = redis.Redis(**kw)
        # No reply post-processing: tests compare what Redis answered.
        for c in (self.text, self.bytes):
            c.response_callbacks = {}

    @classmethod
    def of(cls, settings):
        r = settings.redis
        return cls(r["host"], r["port"], r.get("password"))

    def cmd(self, *args, raw=False):
        return (self.bytes if raw else self.text).execute_command(*args)

    def scan(self, pattern, count=1000):
        """Every key matching PATTERN (SCAN until the cursor is back at 0)."""
        keys, cursor = [], "0"
        while True:
            cursor, batch = self.cmd("SCAN", cursor, "MATCH", pattern, "COUNT", count)
            keys += batch
            if cursor == "0":
                return keys

    def unlink_many(self, keys, batch=1000):
        """UNLINKs KEYS in pipelined batches; how many there were."""
        keys = list(keys)
        pipe = self.text.pipeline(transaction=False)
        for i in range(0, len(keys), batch):
            pipe.execute_command("UNLINK", *keys[i:i + batch])
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
