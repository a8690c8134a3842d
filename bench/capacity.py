#!/usr/bin/python3
"""capacity.py: herald's capacity model from figures measured on this machine.

  bench/capacity.py measure [--n N] [--mysql-n N] [--inputs FILE]
      Measures the byte figures and writes them into FILE's "redis" and
      "mysql" sections (the other sections are left as they are):
      - Redis: a private redis-server (same binary and --stream-node-max-bytes
        as deploy/local/stack, no persistence, on a unix socket in a temporary
        directory) so that nobody else's keys move used_memory; the real
        throttle.lua is run for the throttle windows (sorted sets).
      - MySQL: the stack's MariaDB (HERALD_HOME's stack.json): a scratch
        database gets the tables as SHOW CREATE TABLE prints them from the
        herald database (every migration applied, no triggers), N rows from
        the sequence engine, ANALYZE TABLE, then information_schema; the
        scratch database is dropped afterwards.
  bench/capacity.py model --subscribers N [--tasks T] --deadline-min M
                          --provider-rps R [--throttle] [--no-delivery-log]
                          [--redis-masters M] [--inputs FILE] [--json]
      Computes Redis memory and CPU (over M masters), MySQL storage, Kafka
      partitions, shards, dispatchers and workers for T tasks of N
      subscribers each, all due at once (docs/capacity.md has the formulas).
  bench/capacity.py log --per-day N [--retention-days R] [--purge-days P]
                        [--days D] [--inputs FILE] [--json]
      MySQL storage of N recipients a day (one task a day, or many) over D
      days (365): the delivery log kept R days (dispatcher.
      delivery_retention_days, 30) by dropping day partitions, the
      subscriptions until `heraldctl purge --finished-before` takes their
      tasks P days after they finished (none without --purge-days), each
      from its measured bytes per row; and what the same would be with no
      retention and no purge.
  bench/capacity.py selftest
      Checks the formulas against a hand-computed example (no servers).

It is a script and not a bench/run scenario because it times nothing: the
byte counts are deterministic, need no herald process, and the model must
run (and be tested) without a stack.  The throughput inputs come from
bench/run e2e and dispatch result files, copied into FILE with their date
and load.
"""

import argparse
import json
import math
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_INPUTS = os.path.join(HERE, 'capacity-inputs.json')
MIB = 1024 * 1024
GIB = 1024 * MIB

# ----------------------------------------------------------------- the model

# common/hr_shard.h: a task expected to hold N recipients gets
# S = ceil(N / SHARD_RECIPIENTS) shards, at most SHARDS_MAX (hr_shard_for_size);
# the selftest reads the header so the two cannot drift apart.
SHARD_RECIPIENTS = 250000
SHARDS_MAX = 256
SHARD_HEADER = os.path.join(ROOT, 'common', 'hr_shard.h')


def shards_for(subscribers):
    """hr_shard_for_size: the shards of a task created with
    expected_recipients = SUBSCRIBERS."""
    if subscribers <= SHARD_RECIPIENTS:
        return 1
    return min(SHARDS_MAX, -(-subscribers // SHARD_RECIPIENTS))


def model(inp, subscribers, tasks, deadline_min, provider_rps, throttle=False,
          delivery_log=True, masters=1):
    """Sizes for TASKS tasks of SUBSCRIBERS each, all due at the same time,
    to be pushed within DEADLINE_MIN minutes at a provider limit of
    PROVIDER_RPS pushes/s, on a Redis of MASTERS masters (1: one server).
    Every task is sharded as hr_shard_for_size(SUBSCRIBERS) says.  INP is
    the inputs file's dict.  Returns a dict; 'feasible' is False with
    'limits' naming what cannot be met."""
    red, my, thr = inp['redis'], inp['mysql'], inp['throughput']
    total = subscribers * tasks
    chunk = thr['chunk_size']
    deadline_s = deadline_min * 60.0
    # The first push comes this long after due; the rest must fit in what
    # is left.
    budget_s = deadline_s - thr['first_push_lag_s']
    out = {'subscribers': subscribers, 'tasks': tasks, 'recipients': total,
           'deadline_min': deadline_min, 'provider_rps': provider_rps,
           'throttle': throttle, 'delivery_log': delivery_log, 'redis_masters': masters,
           'limits': []}
    if budget_s <= 0:
        raise ValueError('a deadline of %g min is not longer than the first-push lag (%g s)'
                         % (deadline_min, thr['first_push_lag_s']))
    need_rps = total / budget_s
    out['need_rps'] = need_rps

    # Provider: nothing herald adds goes faster than R.
    if need_rps > provider_rps:
        out['limits'].append('provider: %d/s needs %.1f min at least'
                             % (provider_rps, total / provider_rps / 60
                                + thr['first_push_lag_s'] / 60))

    # Workers: one worker's measured rate.  On the 2-core bench machine more
    # workers measure the machine, not the worker (docs/capacity.md).
    per_worker = thr['pushes_per_s_per_worker']
    out['per_worker_rps'] = per_worker
    out['workers'] = max(1, math.ceil(need_rps / per_worker))
    # CPU the workers and the dispatcher burn per push: the cores to give
    # them, whatever the number of processes.
    out['herald_cores'] = need_rps * thr['herald_cpu_us_per_push'] / 1e6

    # Shards: a task of S shards keeps S sets of at most ceil(N / S)
    # members; each set is claimed and cut by one dispatcher at a time, so
    # up to S dispatchers chunk one task, and T x S sets are the units of
    # work (and of Redis placement: each has its own hash tag).
    shards = shards_for(subscribers)
    per_shard = -(-subscribers // shards)
    units = tasks * shards
    out['shards_per_task'] = shards
    out['recipients_per_shard'] = per_shard
    # Dispatchers: d is one dispatcher's rate on sets of at most
    # SHARD_RECIPIENTS members (smaller sets are cut faster: SPOP's cost
    # grows with the set).
    per_dsp = thr['dispatch_recipients_per_s']
    out['dispatchers'] = max(1, min(units, math.ceil(need_rps / per_dsp)))
    if need_rps > units * per_dsp:
        out['limits'].append('dispatch: %d set(s) of %d cut by one dispatcher each at %d/s '
                             'take %.1f min' % (units, per_shard, per_dsp,
                                                total / (units * per_dsp) / 60))

    # Kafka: a partition is read by one worker of the group, so at least one
    # partition per worker; messages are chunk references, not recipients,
    # cut per shard (at most this many: the shards' sizes vary a little).
    out['kafka_partitions'] = out['workers']
    out['kafka_messages'] = units * math.ceil(per_shard / chunk)

    # Redis: every recipient costs Redis CPU (import, chunk move, ack; r) and
    # the throttle script when throttling is on (r_t - r).  The campaign's
    # keys live in the slots of the T x S hash tags, so on M masters one
    # master holds at least ceil(units / M) of them (as even as the slots
    # allow); the throttle windows are keys per uid, spread over all M.
    share = math.ceil(units / masters) / units
    out['redis_master_share'] = share
    r_us = thr['redis_cpu_us_per_recipient']
    thr_us = (thr['redis_cpu_us_per_recipient_throttle'] - r_us) if throttle else 0.0
    us_per_recipient_master = r_us * share + thr_us / masters
    redis_rps = 1e6 / us_per_recipient_master
    out['redis_rps'] = redis_rps
    out['redis_busiest_master_cpu'] = need_rps * us_per_recipient_master / 1e6
    if need_rps > redis_rps:
        out['limits'].append('Redis, %d master(s): %.0f recipients/s (%.1f CPU-us each on '
                             'the busiest master)' % (masters, redis_rps,
                                                      us_per_recipient_master))

    # Redis memory at due: every recipient is in a subs set or already in a
    # chunk set (the campaign figure: chunk sets, leases and pending, per
    # member); take the larger.  Throttle windows live one per pushed
    # recipient for the throttle window.
    per_sub = max(red['subs_bytes_per_member_hashtable'],
                  red['campaign_bytes_per_member'])
    campaign = total * per_sub + units * red['per_task_bytes']
    windows = total * red['throttle_bytes_per_recipient'] if throttle else 0.0
    out['redis_bytes'] = campaign + windows
    out['redis_bytes_per_recipient'] = out['redis_bytes'] / total
    out['redis_bytes_busiest_master'] = campaign * share + windows / masters

    # MySQL: one subscription row per recipient, kept; one delivery row per
    # recipient when worker.delivery_log is on.
    rows = my['subscription_bytes_per_row']
    if delivery_log:
        rows += my['delivery_bytes_per_row']
    out['mysql_bytes'] = total * rows
    # The subscribers must be in both stores before due (heraldctl import).
    out['import_min'] = total / thr['import_ids_per_s'] / 60
    out['feasible'] = not out['limits']
    # What R and the machine allow: the slowest of provider, workers as
    # sized, Redis's masters and the dispatchers as sized.  (A task's own
    # sets need no term of their own: the dispatchers are at most the T x S
    # sets, so each task gets its share of them.)
    rate = min(provider_rps, out['workers'] * per_worker, redis_rps,
               per_dsp * out['dispatchers'])
    out['makespan_min'] = (total / rate + thr['first_push_lag_s']) / 60
    return out


def log_model(inp, per_day, retention_days=30, purge_days=None, days=365):
    """MySQL storage after DAYS days of PER_DAY recipients a day.  The
    delivery log holds the days of the tasks due from today - RETENTION_DAYS
    on (dsp_dlog.c drops the older partitions; the newest days are full
    when the drop runs just after midnight, so R + 1 days at most), at its
    measured bytes per row in a day partition; the subscriptions the tasks
    not purged yet (PURGE_DAYS + 1 days when a daily purge takes those that
    finished more than PURGE_DAYS ago; all of them without).  INP is the
    inputs file's dict."""
    q = inp['delivery_log']['bytes_per_row']
    p = inp['mysql']['subscription_bytes_per_row']
    log_days = min(days, retention_days + 1)
    sub_days = days if purge_days is None else min(days, purge_days + 1)
    out = {'per_day': per_day, 'days': days, 'retention_days': retention_days,
           'purge_days': purge_days, 'delivery_bytes_per_row': q,
           'subscription_bytes_per_row': p,
           'partitions': retention_days + 1 + inp['delivery_log']['ahead_days'] + 1,
           'delivery_rows': per_day * log_days, 'subscription_rows': per_day * sub_days}
    out['delivery_bytes'] = out['delivery_rows'] * q
    out['subscription_bytes'] = out['subscription_rows'] * p
    out['total_bytes'] = out['delivery_bytes'] + out['subscription_bytes']
    # The same without retention nor purge: everything since day one.
    out['unbounded_delivery_bytes'] = per_day * days * q
    out['unbounded_subscription_bytes'] = per_day * days * p
    out['unbounded_bytes'] = out['unbounded_delivery_bytes'] + out['unbounded_subscription_bytes']
    return out


def log_render(m):
    purge = ('purged %d days after they finished' % m['purge_days']
             if m['purge_days'] is not None else 'never purged')
    return '\n'.join([
        '%d recipients a day for %d days; delivery log kept %d days, subscriptions %s'
        % (m['per_day'], m['days'], m['retention_days'], purge),
        '  delivery log    %14d rows x %6.1f B = %9.1f GiB  (%d partitions)'
        % (m['delivery_rows'], m['delivery_bytes_per_row'], m['delivery_bytes'] / GIB,
           m['partitions']),
        '  subscriptions   %14d rows x %6.1f B = %9.1f GiB'
        % (m['subscription_rows'], m['subscription_bytes_per_row'],
           m['subscription_bytes'] / GIB),
        '  total           %38.1f GiB' % (m['total_bytes'] / GIB),
        '  without retention or purge: %.1f GiB (delivery log %.1f, subscriptions %.1f)'
        % (m['unbounded_bytes'] / GIB, m['unbounded_delivery_bytes'] / GIB,
           m['unbounded_subscription_bytes'] / GIB)])


def render(m):
    lines = ['%d task(s) x %d subscribers = %d recipients, deadline %g min, provider %d/s, '
             'Redis %d master(s)%s'
             % (m['tasks'], m['subscribers'], m['recipients'], m['deadline_min'],
                m['provider_rps'], m['redis_masters'], ', throttle on' if m['throttle'] else ''),
             '  needed rate          %12.0f pushes/s' % m['need_rps'],
             '  workers              %12d   (%.0f/s each)' % (m['workers'], m['per_worker_rps']),
             '  herald cpu           %12.1f cores' % m['herald_cores'],
             '  shards per task      %12d   (%d recipients each)'
             % (m['shards_per_task'], m['recipients_per_shard']),
             '  dispatchers          %12d' % m['dispatchers'],
             '  kafka partitions     %12d   (%d chunk messages at most)'
             % (m['kafka_partitions'], m['kafka_messages']),
             '  redis memory at due  %12.2f GiB (%.0f B/recipient; busiest master %.2f GiB)'
             % (m['redis_bytes'] / GIB, m['redis_bytes_per_recipient'],
                m['redis_bytes_busiest_master'] / GIB),
             '  redis cpu            %12.2f cores on the busiest master (at most %.0f/s)'
             % (m['redis_busiest_master_cpu'], m['redis_rps']),
             '  mysql storage        %12.2f GiB%s'
             % (m['mysql_bytes'] / GIB, '' if m['delivery_log'] else ' (no delivery log)'),
             '  import beforehand    %12.1f min' % m['import_min'],
             '  makespan as sized    %12.1f min' % m['makespan_min']]
    lines += ['  LIMIT: ' + l for l in m['limits']]
    lines.append('  feasible' if m['feasible'] else '  NOT feasible as asked')
    return '\n'.join(lines)


# ----------------------------------------------------------------- self-test

SELFTEST_INPUTS = {
    'redis': {'subs_bytes_per_member_hashtable': 60, 'campaign_bytes_per_member': 50,
              'per_task_bytes': 500,
              'throttle_bytes_per_recipient': 200},
    'mysql': {'subscription_bytes_per_row': 70, 'delivery_bytes_per_row': 80},
    'delivery_log': {'bytes_per_row': 100, 'ahead_days': 7},
    'throughput': {'chunk_size': 5000, 'first_push_lag_s': 60,
                   'pushes_per_s_per_worker': 10000, 'herald_cpu_us_per_push': 50,
                   'dispatch_recipients_per_s': 100000, 'import_ids_per_s': 200000,
                   'redis_cpu_us_per_recipient': 10,
                   'redis_cpu_us_per_recipient_throttle': 40},
}


def selftest():
    """Hand-computed examples (SELFTEST_INPUTS), each worked out in the
    comments above its checks."""
    fails = []

    def check(what, got, want):
        if abs(got - want) > 1e-6 * max(1, abs(want)):
            fails.append('%s: got %r, want %r' % (what, got, want))

    # The shard arithmetic is hr_shard_for_size's, with the header's
    # constants: 250,000 -> 1, 250,001 -> 2, 100M -> 400 capped at 256.
    with open(SHARD_HEADER) as f:
        header = f.read()
    for name, value in (('HR_SHARD_RECIPIENTS', SHARD_RECIPIENTS),
                        ('HR_SHARDS_MAX', SHARDS_MAX)):
        if '#define %s %d\n' % (name, value) not in header:
            fails.append('%s is not %d in common/hr_shard.h' % (name, value))
    for n, want in ((1, 1), (250_000, 1), (250_001, 2), (6_000_000, 24),
                    (64_000_000, 256), (100_000_000, 256)):
        check('shards_for(%d)' % n, shards_for(n), want)

    # 1 task of 6,000,000, deadline 11 min (660 s, 600 s after the 60 s
    # lag) -> 10,000/s: 1 worker, 24 shards of 250,000, 1 dispatcher, 1
    # partition, 24 x 50 = 1,200 chunks; Redis 6e6 x max(60, 50) + 24 x 500
    # = 360,012,000 B; MySQL 6e6 x 150 = 900,000,000 B; one master
    # 1e6 / 10 = 100,000/s, busy 10,000 x 10 us = 0.1 core; makespan
    # max(6e6 / 10,000, 6e6 / 100,000) + 60 = 660 s = 11 min; 10,000 x
    # 50 us = 0.5 cores; import 6e6 / 200,000 = 30 s = 0.5 min.
    m = model(SELFTEST_INPUTS, 6_000_000, 1, 11, 20000)
    check('need_rps', m['need_rps'], 10000)
    check('workers', m['workers'], 1)
    check('shards', m['shards_per_task'], 24)
    check('per_shard', m['recipients_per_shard'], 250_000)
    check('dispatchers', m['dispatchers'], 1)
    check('partitions', m['kafka_partitions'], 1)
    check('messages', m['kafka_messages'], 1200)
    check('redis', m['redis_bytes'], 360_012_000)
    check('redis_master', m['redis_bytes_busiest_master'], 360_012_000)
    check('redis_rps', m['redis_rps'], 100_000)
    check('redis_cpu', m['redis_busiest_master_cpu'], 0.1)
    check('mysql', m['mysql_bytes'], 900_000_000)
    check('makespan', m['makespan_min'], 11)
    check('cores', m['herald_cores'], 0.5)
    check('import', m['import_min'], 0.5)
    check('feasible', m['feasible'], True)
    # The same on 3 masters: 24 shard tags, 8 on the busiest master (1/3):
    # 120,004,000 B there, 1e6 / (10 / 3) = 300,000/s.
    m = model(SELFTEST_INPUTS, 6_000_000, 1, 11, 20000, masters=3)
    check('m3.share', m['redis_master_share'], 1 / 3)
    check('m3.redis_master', m['redis_bytes_busiest_master'], 120_004_000)
    check('m3.redis', m['redis_bytes'], 360_012_000)
    check('m3.redis_rps', m['redis_rps'], 300_000)
    # Throttle on, 300 tasks of 100,000 (one shard each) in 60 min (3,540 s
    # of budget): 30e6 / 3540 = 8,474.6/s -> 1 worker; one master does 10 +
    # (40 - 10) = 40 us per recipient = 25,000/s, fine; Redis 30e6 x (60 +
    # 200) + 300 x 500 = 7,800,150,000 B.
    m = model(SELFTEST_INPUTS, 100_000, 300, 60, 50000, throttle=True, delivery_log=False)
    check('t.need_rps', m['need_rps'], 30e6 / 3540)
    check('t.workers', m['workers'], 1)
    check('t.shards', m['shards_per_task'], 1)
    check('t.redis', m['redis_bytes'], 7_800_150_000)
    check('t.redis_rps', m['redis_rps'], 25_000)
    check('t.mysql', m['mysql_bytes'], 30e6 * 70)
    # On 4 masters: 75 of the 300 task tags on the busiest (1/4) and the
    # windows spread: 10 x 0.25 + 30 / 4 = 10 us -> 100,000/s;
    # (1,800,150,000) / 4 + 6e9 / 4 = 1,950,037,500 B there.
    m = model(SELFTEST_INPUTS, 100_000, 300, 60, 50000, throttle=True, delivery_log=False,
              masters=4)
    check('t4.redis_rps', m['redis_rps'], 100_000)
    check('t4.redis_master', m['redis_bytes_busiest_master'], 1_950_037_500)
    # 100M in one task within 10 min (540 s) at 100k/s on one master:
    # 185,185/s needed; 256 shards of 390,625, 256 x 79 = 20,224 chunks;
    # workers ceil(18.5) = 19, dispatchers ceil(1.85) = 2; the provider
    # (1,000 s) and one master (1e6 / 10 = 100k/s) refuse, the dispatch
    # (256 sets x 100k/s) does not; makespan 1e8 / 100k + 60 s (the task's
    # 2 dispatchers would cut it in 500 s).
    m = model(SELFTEST_INPUTS, 100_000_000, 1, 10, 100000)
    check('h.shards', m['shards_per_task'], 256)
    # 10M a day for 365 days, log kept 30 days, purge 30 days after the
    # finish: 31 days of each, 310M rows; 310e6 x 100 = 31e9 B of log,
    # 310e6 x 70 = 21.7e9 B of subscriptions; 30 + 1 + 7 + 1 = 39
    # partitions; unbounded 3.65e9 x 170 = 620.5e9 B.  Without purge the
    # subscriptions are the 365 days: 3.65e9 x 70.  After 10 days, 10 of
    # each.
    g = log_model(SELFTEST_INPUTS, 10_000_000, 30, 30, 365)
    check('g.delivery', g['delivery_bytes'], 31e9)
    check('g.subs', g['subscription_bytes'], 21.7e9)
    check('g.partitions', g['partitions'], 39)
    check('g.unbounded', g['unbounded_bytes'], 620.5e9)
    check('g.nopurge', log_model(SELFTEST_INPUTS, 10_000_000, 30, None, 365)
          ['subscription_bytes'], 255.5e9)
    check('g.early', log_model(SELFTEST_INPUTS, 10_000_000, 30, 30, 10)['total_bytes'],
          10e6 * 10 * 170)
    check('h.per_shard', m['recipients_per_shard'], 390_625)
    check('h.messages', m['kafka_messages'], 20_224)
    check('h.workers', m['workers'], 19)
    check('h.dispatchers', m['dispatchers'], 2)
    check('h.limits', len(m['limits']), 2)
    check('h.feasible', m['feasible'], False)
    check('h.makespan', m['makespan_min'], (1000 + 60) / 60)
    # On 3 masters: 86 of the 256 tags on the busiest, 10 x 86 / 256 =
    # 3.359375 us -> 297,674/s: only the provider refuses.
    m = model(SELFTEST_INPUTS, 100_000_000, 1, 10, 100000, masters=3)
    check('h3.redis_rps', m['redis_rps'], 1e6 / (10 * 86 / 256))
    check('h3.limits', len(m['limits']), 1)
    # One set cut by one dispatcher: 250,000 (1 shard) in 61.5 s, 1.5 s
    # after the lag: 166,667/s against d = 100,000/s: the dispatch and the
    # one master refuse; makespan 250,000 / 100,000 + 60 = 62.5 s.
    m = model(SELFTEST_INPUTS, 250_000, 1, 61.5 / 60, 10 ** 6)
    check('d.limits', len(m['limits']), 2)
    check('d.dispatch', m['limits'][0].startswith('dispatch:'), True)
    check('d.dispatchers', m['dispatchers'], 1)
    check('d.makespan', m['makespan_min'], 62.5 / 60)
    # The committed inputs hold every figure the model reads (a KeyError
    # here means measure and model drifted apart), and the worked example of
    # docs/capacity.md still needs more than one worker.
    with open(DEFAULT_INPUTS) as f:
        m = model(json.load(f), 100_000_000, 1, 30, 100000, throttle=True)
    check('inputs.positive', min(m['redis_bytes'], m['mysql_bytes'], m['herald_cores']) > 0,
          True)
    check('inputs.workers>1', m['workers'] > 1, True)
    if fails:
        print('capacity selftest FAILED:\n  ' + '\n  '.join(fails))
        return 1
    print('capacity selftest: ok')
    return 0


# ----------------------------------------------------------------- measure


class Redis:
    """A private redis-server on a unix socket, driven with redis-cli."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='herald-capacity-')
        self.sock = os.path.join(self.dir, 'redis.sock')
        self.proc = subprocess.Popen(
            ['redis-server', '--port', '0', '--unixsocket', self.sock, '--save', '',
             '--appendonly', 'no', '--dir', self.dir, '--stream-node-max-bytes', '256'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(self.sock) and self.cmd('PING') == 'PONG':
                return
            time.sleep(0.05)
        self.close()
        raise RuntimeError('private redis-server did not start')

    def cmd(self, *args):
        r = subprocess.run(['redis-cli', '-s', self.sock] + [str(a) for a in args],
                           capture_output=True, text=True, timeout=60)
        return r.stdout.strip()

    def pipe(self, commands):
        """COMMANDS: lists of arguments, sent with redis-cli --pipe."""
        buf = []
        for c in commands:
            buf.append('*%d\r\n' % len(c))
            for a in c:
                a = str(a)
                buf.append('$%d\r\n%s\r\n' % (len(a.encode()), a))
        r = subprocess.run(['redis-cli', '-s', self.sock, '--pipe'], input=''.join(buf),
                           capture_output=True, text=True, timeout=300)
        if 'errors: 0' not in r.stdout:
            raise RuntimeError('redis --pipe: ' + r.stdout[-300:])

    def used(self):
        for line in self.cmd('INFO', 'memory').splitlines():
            if line.startswith('used_memory:'):
                return int(line.split(':')[1])
        raise RuntimeError('no used_memory')

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def uids(task, n):
    # As bench/run makes them: task id x 10^9 + 1..N, decimal strings of
    # push_subscription.uid (BIGINT UNSIGNED), which is what SADD receives.
    # The callers' task ids are >= 1001: 13-digit uids, above 2^31, so an
    # intset holds them as int64 (uids below 2^31 would take half of that).
    return [task * 1_000_000_000 + i for i in range(1, n + 1)]


def sadd_batches(key, members, batch=1000):
    return [['SADD', key] + members[i:i + batch] for i in range(0, len(members), batch)]


def measure_redis(n, chunk):
    r = Redis()
    try:
        res = {'version': r.cmd('INFO', 'server').split('redis_version:')[1].split()[0],
               'n': n}
        for enc, entries in (('hashtable', 512), ('intset', n)):
            r.cmd('FLUSHALL')
            r.cmd('CONFIG', 'SET', 'set-max-intset-entries', entries)
            before = r.used()
            r.pipe(sadd_batches('bench:{t1}:subs', uids(1001, n)))
            after = r.used()
            got = r.cmd('OBJECT', 'ENCODING', 'bench:{t1}:subs')
            if got != enc or r.cmd('SCARD', 'bench:{t1}:subs') != str(n):
                raise RuntimeError('subs set: %s, want %s' % (got, enc))
            res['subs_bytes_per_member_' + enc] = round((after - before) / n, 2)
            res['subs_memory_usage_' + enc] = int(r.cmd('MEMORY', 'USAGE', 'bench:{t1}:subs',
                                                        'SAMPLES', '0'))
        r.cmd('FLUSHALL')
        r.cmd('CONFIG', 'SET', 'set-max-intset-entries', 512)
        # A running campaign of N: N/chunk chunk sets (members move there from
        # subs), a lease per chunk held, the pending hash (seq -> publish ms)
        # and the stats hash.
        nchunks = n // chunk
        before = r.used()
        cmds = []
        members = uids(1002, n)
        for s in range(nchunks):
            key = 'bench:{t2}:chunk:%d' % (s + 1)
            cmds += sadd_batches(key, members[s * chunk:(s + 1) * chunk])
            cmds.append(['HSET', 'bench:{t2}:pending', s + 1, 1795346495261 + s])
            cmds.append(['SET', 'bench:{t2}:lease:%d' % (s + 1), 'bench-worker-0:12345:1',
                         'PX', 60000])
        r.pipe(cmds)
        after = r.used()
        chunk_set = int(r.cmd('MEMORY', 'USAGE', 'bench:{t2}:chunk:1', 'SAMPLES', '0'))
        lease = int(r.cmd('MEMORY', 'USAGE', 'bench:{t2}:lease:1'))
        res['chunk_set_memory_usage'] = chunk_set
        res['chunk_bytes_per_member'] = round(chunk_set / chunk, 2)
        res['lease_memory_usage'] = lease
        res['pending_memory_usage_%d_chunks' % nchunks] = int(
            r.cmd('MEMORY', 'USAGE', 'bench:{t2}:pending'))
        # The model's figure: everything the running campaign added, per
        # member (MEMORY USAGE of the sample sets leaves out part of it).
        res['campaign_bytes_per_member'] = round((after - before) / n, 2)
        # Per chunk beyond its members, for the record: its lease and its
        # pending field.
        res['per_chunk_bytes'] = lease + round(
            res['pending_memory_usage_%d_chunks' % nchunks] / nchunks)
        stats = ['HSET', 'bench:{t2}:stats']
        for f in ('sent', 'failed', 'throttled', 'retried', 'published', 'chunks_done',
                  'pulled'):
            stats += [f, 1000000]
        r.pipe([stats, ['SET', 'bench:{t2}:seq', nchunks], ['SET', 'bench:{t2}:ctl', 'run'],
                ['SET', 'bench:{t2}:synced', 123456]])
        res['per_task_bytes'] = sum(int(r.cmd('MEMORY', 'USAGE', 'bench:{t2}:' + k))
                                    for k in ('stats', 'seq', 'ctl', 'synced'))
        # Throttle: one window (a sorted set, one member per task that
        # passed) per recipient, written by the real throttle.lua (limit 5,
        # window 1 h, tag = task id).
        with open(os.path.join(ROOT, 'common', 'lua', 'throttle.lua')) as f:
            sha = r.cmd('SCRIPT', 'LOAD', f.read())
        tn = 20000
        before = r.used()
        r.pipe([['EVALSHA', sha, 1, 'bench:thr:cap:%d' % u, 5, 3600000, 2] for u in uids(1003, tn)])
        after = r.used()
        res['throttle_keys'] = tn
        res['throttle_bytes_per_recipient'] = round((after - before) / tn, 2)
        res['throttle_memory_usage_sample'] = int(
            r.cmd('MEMORY', 'USAGE', 'bench:thr:cap:1003000000001'))
        # Local-time tasks hold their not-yet-due recipients in a ZSET
        # (score: the release ms, one of 24 zones here).
        before = r.used()
        wait = uids(1004, n)
        r.pipe([['ZADD', 'bench:{t4}:wait']
                + [x for u in wait[i:i + 1000] for x in (1795346495261 + (u % 24) * 3600000, u)]
                for i in range(0, n, 1000)])
        res['wait_bytes_per_member'] = round((r.used() - before) / n, 2)
        return res
    finally:
        r.close()


def measure_mysql(n):
    home = os.environ.get('HERALD_HOME', os.path.join(ROOT, '.herald'))
    with open(os.path.join(home, 'stack.json')) as f:
        st = json.load(f)['mysql']
    # The administrator is the OS user, through the socket (as the stack).
    me = pwd.getpwuid(os.getuid()).pw_name
    base = ['mariadb', '--no-defaults', '--socket=' + st['socket'], '-u' + me, '-N', '-B']

    def sql(q, db=None):
        r = subprocess.run(base + ([db] if db else []) + ['-e', q], capture_output=True,
                           text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError('mariadb: %s: %s' % (q[:80], r.stderr.strip()))
        return r.stdout

    scratch = 'herald_capacity'
    res = {'version': sql('SELECT VERSION()').strip(), 'n': n}
    sql('DROP DATABASE IF EXISTS %s; CREATE DATABASE %s' % (scratch, scratch))
    try:
        for t in ('push_subscription', 'push_delivery'):
            ddl = sql('SHOW CREATE TABLE %s' % t, st['database']).split('\t', 1)[1]
            sql(ddl.replace('\\n', '\n'), scratch)
        sql('INSERT INTO push_subscription (task_id, uid) '
            'SELECT 1, 1001000000000 + seq FROM seq_1_to_%d' % n, scratch)
        sql("INSERT INTO push_delivery (task_id, uid, status, attempts, http_status, "
            "latency_ms, at, day) SELECT 1, 1001000000000 + seq, 'sent', 1, 200, "
            "seq %% 30000, NOW(3), UTC_DATE() FROM seq_1_to_%d" % n, scratch)
        sql('ANALYZE TABLE push_subscription, push_delivery', scratch)
        for t, name in (('push_subscription', 'subscription'), ('push_delivery', 'delivery')):
            data, index = map(int, sql(
                "SELECT data_length, index_length FROM information_schema.tables "
                "WHERE table_schema = '%s' AND table_name = '%s'" % (scratch, t)).split())
            res[name + '_data_bytes'] = data
            res[name + '_index_bytes'] = index
            res[name + '_bytes_per_row'] = round((data + index) / n, 2)
        return res
    finally:
        sql('DROP DATABASE IF EXISTS %s' % scratch)


def measure(args):
    load = os.getloadavg()
    stamp = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    red = measure_redis(args.n, args.chunk_size)
    my = measure_mysql(args.mysql_n)
    red['measured'] = my['measured'] = '%s, load %.2f %.2f %.2f' % ((stamp,) + load)
    try:
        with open(args.inputs) as f:
            inp = json.load(f)
    except FileNotFoundError:
        inp = {}
    inp['redis'], inp['mysql'] = red, my
    with open(args.inputs, 'w') as f:
        json.dump(inp, f, indent=2)
        f.write('\n')
    print(json.dumps({'redis': red, 'mysql': my}, indent=2))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    m = sub.add_parser('measure')
    m.add_argument('--n', type=int, default=1_000_000)
    m.add_argument('--mysql-n', type=int, default=1_000_000)
    m.add_argument('--chunk-size', type=int, default=5000)
    m.add_argument('--inputs', default=DEFAULT_INPUTS)
    c = sub.add_parser('model')
    c.add_argument('--subscribers', type=int, required=True)
    c.add_argument('--tasks', type=int, default=1)
    c.add_argument('--deadline-min', type=float, required=True)
    c.add_argument('--provider-rps', type=int, required=True)
    c.add_argument('--throttle', action='store_true')
    c.add_argument('--no-delivery-log', action='store_true')
    c.add_argument('--redis-masters', type=int, default=1)
    c.add_argument('--inputs', default=DEFAULT_INPUTS)
    c.add_argument('--json', action='store_true')
    g = sub.add_parser('log')
    g.add_argument('--per-day', type=int, required=True)
    g.add_argument('--retention-days', type=int, default=30)
    g.add_argument('--purge-days', type=int)
    g.add_argument('--days', type=int, default=365)
    g.add_argument('--inputs', default=DEFAULT_INPUTS)
    g.add_argument('--json', action='store_true')
    sub.add_parser('selftest')
    a = ap.parse_args()
    if a.cmd == 'log':
        if min(a.per_day, a.retention_days, a.days) <= 0 or (a.purge_days or 0) < 0:
            ap.error('--per-day, --retention-days and --days must be > 0, --purge-days >= 0')
        with open(a.inputs) as f:
            g = log_model(json.load(f), a.per_day, a.retention_days, a.purge_days, a.days)
        print(json.dumps(g, indent=2) if a.json else log_render(g))
        return 0
    if a.cmd == 'model' and min(a.subscribers, a.tasks, a.deadline_min, a.provider_rps,
                                a.redis_masters) <= 0:
        ap.error('--subscribers, --tasks, --deadline-min, --provider-rps and --redis-masters '
                 'must be > 0')
    if a.cmd == 'selftest':
        return selftest()
    if a.cmd == 'measure':
        return measure(a)
    with open(a.inputs) as f:
        inp = json.load(f)
    try:
        r = model(inp, a.subscribers, a.tasks, a.deadline_min, a.provider_rps, a.throttle,
                  not a.no_delivery_log, a.redis_masters)
    except ValueError as e:
        ap.error(str(e))
    print(json.dumps(r, indent=2) if a.json else render(r))
    return 0 if r['feasible'] else 1


if __name__ == '__main__':
    sys.exit(main())
