"""Unit tests of the fault matrix's stall measure for worker-kill
(tests/faults/stall.py kill_stall), on logs written here: no stack needed.
Run: python3 tests/faults/test_stall.py"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stall as run  # noqa: E402


class Proc:
    def __init__(self, log):
        self.log = log


def line(sec, event, rest=""):
    return ("ts=2026-12-03T09:23:%06.3fZ level=info instance=w event=%s %s\n"
            % (sec, event, rest))


def start(sec, seq, partition):
    return line(sec, "chunk_start", "task=21 seq=%d recipients=100 partition=%d offset=1"
                % (seq, partition))


def done(sec, seq):
    return line(sec, "chunk_done", "task=21 seq=%d recipients=100 sent=100" % seq)


T0 = run.log_ts(b"2026-12-03T09:23:00.000Z")


class TestKillStall(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, lines):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write("".join(lines))
        return path

    def test_backlog_first(self):
        """CI's seed 189584: the dead worker held partitions 8 and 9 (chunk
        5 on partition 7 ended before the revoke), the new owner started
        their backlog (seq 16, partition 8) 5.4 s after the kill and its
        open chunks 10.3 s after: the stall is the 5.4 s."""
        dead = self.write("dead.log", [
            start(1.0, 5, 7), line(1.4, "chunk_abandoned", "task=21 seq=5 reason=revoked"),
            line(1.5, "partitions_revoked", "count=4"),
            start(2.0, 13, 9), start(2.1, 17, 8), done(3.0, 13), start(3.1, 18, 9)])
        heir = self.write("heir.log", [
            start(1.0, 40, 8),                       # before the kill: no resume
            start(17.4, 16, 8), start(17.5, 30, 3),  # partition 3 was not the dead one's
            start(22.3, 17, 8), start(25.0, 18, 9)])
        mark = (Proc(dead), 0, os.path.getsize(dead), T0 + 12.0)
        first, last = run.kill_stall(mark, [dead, heir])
        self.assertAlmostEqual(first, 5.4, places=3)
        self.assertAlmostEqual(last, 13.0, places=3)

    def test_open_chunk_elsewhere(self):
        """An open chunk taken up on a partition the dead worker no longer
        held (an empty redelivery's chunk_done) ends the stall too."""
        dead = self.write("dead.log", [start(1.0, 5, 7), line(1.5, "partitions_revoked", "")])
        heir = self.write("heir.log", [done(14.0, 5)])
        first, last = run.kill_stall((Proc(dead), 0, os.path.getsize(dead), T0 + 12.0),
                                     [dead, heir])
        self.assertAlmostEqual(first, 2.0, places=3)
        self.assertAlmostEqual(last, 2.0, places=3)

    def test_never_and_none_open(self):
        dead = self.write("dead.log", [start(1.0, 5, 7), done(2.0, 5), start(3.0, 6, 7)])
        heir = self.write("heir.log", [start(20.0, 9, 2)])
        mark = (Proc(dead), 0, os.path.getsize(dead), T0 + 12.0)
        self.assertEqual(run.kill_stall(mark, [dead, heir]), (None, None))
        idle = self.write("idle.log", [start(1.0, 5, 7), done(2.0, 5)])
        mark = (Proc(idle), 0, os.path.getsize(idle), T0 + 12.0)
        self.assertEqual(run.kill_stall(mark, [idle, heir]), (0.0, 0.0))


if __name__ == "__main__":
    unittest.main()
