#!/usr/bin/python3
"""bench/peers/seed002.py: the peer herald is measured against (issue 19).

The mass-mailing pipeline of ../shared/seeds/002 (Ostrovok's notification
service), rebuilt as its article describes it, on the same sink herald pushes
to, so that `bench/run peer` can compare CPU per push:

  * one process per worker, each given its own slice of recipient ids (the
    article's "one chunk for each worker");
  * in each process one asyncio loop with
    - PRODUCERS producers: sub-chunks of PRODUCER_SUBCHUNK ids are read from
      MySQL in a ThreadPoolExecutor (the article's ORM step) and rendered with
      Jinja2, then put on a bounded task queue (2 x SENDERS);
    - SENDERS sender coroutines: aiohttp POSTs through one ClientSession
      (TCPConnector without a connection limit), results (or the exception)
      onto a bounded result queue;
    - one reporter: results grouped into REPORTER_BATCH rows and bulk-inserted
      into MySQL from the executor;
  * the campaign ends when the producers are done, the task queue is joined
    (senders cancelled) and the result queue is joined (last batch written).

What the peer does not do, and herald does: no at-least-once across a crash
(a killed process loses its slice), no throttle, no rate limit, no
pause/cancel.  The comparison is CPU per push for the same pushes.

    seed002.py --mysql JSON --url URL --first UID --count N [--processes P]
               [--senders S]

--mysql is a JSON object of pymysql.connect() arguments.  Recipients are read
from table bench_peer_recipient (uid, email); results go to
bench_peer_delivery (uid, status).  Prints one JSON line: sent, failed, wall_s,
cpu_s (all processes: user + system, threads included).
"""
import argparse
import asyncio
import json
import multiprocessing
import resource
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import jinja2
import pymysql

PRODUCERS = 1
PRODUCER_SUBCHUNK = 500
REPORTER_BATCH = 500
TEMPLATE = jinja2.Template(
    '{"uid":"{{ uid }}","title":"{{ title }}","body":"Hello {{ uid }}, '
    'the live show starts now","email":"{{ email }}"}')


class Campaign:
    """One process's share: its ids, its database connections (one per
    executor thread: pymysql connections are not thread-safe)."""

    def __init__(self, mysql_args, ids):
        self.mysql_args = mysql_args
        self.ids = ids
        self.local = threading.local()

    def db(self):
        if getattr(self.local, "conn", None) is None:
            self.local.conn = pymysql.connect(autocommit=True, **self.mysql_args)
        return self.local.conn

    def send_data(self, ids):
        """The article's get_campaign_send_data: read and render a sub-chunk."""
        with self.db().cursor() as cur:
            cur.execute("SELECT uid, email FROM bench_peer_recipient WHERE uid BETWEEN %s AND %s",
                        (ids[0], ids[-1]))
            rows = cur.fetchall()
        return [TEMPLATE.render(uid=uid, email=email, title="Your reminder")
                for uid, email in rows]

    def report(self, results):
        """The article's process_campaign_results: one bulk insert."""
        rows = [(r[0], r[1]) for r in results if not isinstance(r, Exception)]
        if not rows:
            return
        with self.db().cursor() as cur:
            cur.executemany("INSERT INTO bench_peer_delivery (uid, status) VALUES (%s, %s)", rows)


async def producer(c, task_queue):
    loop = asyncio.get_running_loop()
    for start in range(0, len(c.ids), PRODUCER_SUBCHUNK):
        sub = c.ids[start:start + PRODUCER_SUBCHUNK]
        for body in await loop.run_in_executor(None, c.send_data, sub):
            await task_queue.put(body)


async def sender(url, task_queue, result_queue, session, counts):
    while True:
        body = await task_queue.get()
        try:
            async with session.post(url, data=body,
                                    headers={"Content-Type": "application/json"}) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError("status %d" % resp.status)
            counts["sent"] += 1
            await result_queue.put((json.loads(body)["uid"], resp.status))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the article's error branch: reported, not fatal
            counts["failed"] += 1
            await result_queue.put(exc)
        finally:
            task_queue.task_done()


async def reporter(c, result_queue):
    loop = asyncio.get_running_loop()
    batch = []
    while True:
        try:
            batch.append(await result_queue.get())
            if len(batch) >= REPORTER_BATCH:
                await loop.run_in_executor(None, c.report, batch)
                batch = []
        except asyncio.CancelledError:
            await loop.run_in_executor(None, c.report, batch)
            raise
        finally:
            result_queue.task_done()


async def campaign(c, url, senders, counts):
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=PRODUCERS + 1))
    task_queue = asyncio.Queue(maxsize=2 * senders)
    result_queue = asyncio.Queue(maxsize=2 * senders)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        producers = [asyncio.create_task(producer(c, task_queue)) for _ in range(PRODUCERS)]
        sending = [asyncio.create_task(sender(url, task_queue, result_queue, session, counts))
                   for _ in range(senders)]
        report = asyncio.create_task(reporter(c, result_queue))
        await asyncio.gather(*producers)
        await task_queue.join()
        for s in sending:
            s.cancel()
        await result_queue.join()
        report.cancel()
        await asyncio.gather(*sending, report, return_exceptions=True)


def process_main(args):
    mysql_args, url, ids, senders, out = args
    counts = {"sent": 0, "failed": 0}
    asyncio.run(campaign(Campaign(mysql_args, ids), url, senders, counts))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    counts["cpu_s"] = ru.ru_utime + ru.ru_stime
    out.put(counts)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mysql", required=True, help="JSON of pymysql.connect() arguments")
    p.add_argument("--url", required=True)
    p.add_argument("--first", type=int, required=True, help="first uid")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--senders", type=int, default=64, help="sender coroutines per process")
    a = p.parse_args(argv)
    uids = list(range(a.first, a.first + a.count))
    share = -(-len(uids) // a.processes)
    out = multiprocessing.Queue()
    t0 = time.monotonic()
    procs = [multiprocessing.Process(
        target=process_main,
        args=((json.loads(a.mysql), a.url, uids[i * share:(i + 1) * share], a.senders, out),))
        for i in range(a.processes)]
    for pr in procs:
        pr.start()
    results = [out.get() for _ in procs]
    for pr in procs:
        pr.join()
    total = {"sent": sum(r["sent"] for r in results),
             "failed": sum(r["failed"] for r in results),
             "wall_s": round(time.monotonic() - t0, 2),
             "cpu_s": round(sum(r["cpu_s"] for r in results), 2),
             "processes": a.processes, "senders": a.senders}
    print(json.dumps(total))
    return 0 if all(pr.exitcode == 0 for pr in procs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
