#!/usr/bin/env python3
"""test_cli: every binary's --help and --version, and heraldctl's per-command help.

usage: test_cli.py VERSION SOURCE_ROOT HERALD_DISPATCHER HERALD_WORKER HERALDCTL HERALD_SINK
                   HERALD_HOOKS

No server and no configuration is needed (HERALD_CONFIG is cleared):
  - NAME --help and -h: exit 0, "usage: NAME" on stdout, nothing on stderr;
  - NAME --version and -V: exit 0, exactly "NAME VERSION" (meson's project
    version) on stdout, then "test seams: on" from a dispatcher built with them;
  - NAME --no-such-option: exit 2, usage on stderr, nothing on stdout;
  - heraldctl help COMMAND and heraldctl COMMAND --help, for every command
    of `heraldctl help`: exit 0, the same text, naming every long option
    the command's source file declares (struct option) -- a flag added
    without its help line fails here.
"""
import os
import re
import subprocess
import sys

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(argv):
    env = {k: v for k, v in os.environ.items() if k != "HERALD_CONFIG"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env,
                          stdin=subprocess.DEVNULL)


def source_options(path):
    """The long options of the struct option arrays in a C file."""
    text = open(path).read()
    return re.findall(r'\{"([a-z][a-z-]*)",\s*(?:no|required|optional)_argument', text)


def main(argv):
    if len(argv) != 8:
        print(__doc__, file=sys.stderr)
        return 2
    version, root = argv[1], argv[2]
    bins = {"herald-dispatcher": argv[3], "herald-worker": argv[4], "heraldctl": argv[5],
            "herald-sink": argv[6], "herald-hooks": argv[7]}

    for name, path in bins.items():
        for flag in ("--help", "-h"):
            r = run([path, flag])
            check(r.returncode == 0 and r.stdout.startswith("usage: " + name) and
                  r.stderr == "" and "--version" in r.stdout,
                  "%s %s: exit %d, stdout %r" % (name, flag, r.returncode, r.stdout[:40]))
        for flag in ("--version", "-V"):
            r = run([path, flag])
            # A dispatcher built with -Dtest_seams=true says so on a second line.
            check(r.returncode == 0 and r.stdout in ("%s %s\n" % (name, version),
                                                     "%s %s\ntest seams: on\n" % (name, version)),
                  "%s %s: exit %d, stdout %r (want %r)" % (name, flag, r.returncode, r.stdout,
                                                          "%s %s" % (name, version)))
        r = run([path, "--no-such-option"])
        check(r.returncode == 2 and r.stdout == "" and "usage: " + name in r.stderr,
              "%s --no-such-option: exit %d (want 2), usage on stderr" % (name, r.returncode))

    ctl = bins["heraldctl"]
    r = run([ctl, "help"])
    commands = re.findall(r"^  ([a-z]+) ", r.stdout.split("commands:\n", 1)[-1], re.M)
    check(r.returncode == 0 and len(commands) >= 10,
          "heraldctl help lists the commands: %s" % " ".join(commands))
    # The source file of each command whose flags are checked.
    sources = {"create": "cmd_create.c", "list": "cmd_list.c", "status": "cmd_status.c",
               "address": "cmd_address.c", "hooks": "cmd_hooks.c"}
    for cmd in commands:
        h = run([ctl, "help", cmd])
        check(h.returncode == 0 and h.stdout.startswith("usage: heraldctl [-c CONFIG] " + cmd),
              "heraldctl help %s: exit %d" % (cmd, h.returncode))
        if cmd != "help":
            d = run([ctl, cmd, "--help"])
            check(d.returncode == 0 and d.stdout == h.stdout,
                  "heraldctl %s --help: exit %d, same text as help %s" % (cmd, d.returncode, cmd))
        if cmd in sources:
            flags = source_options(os.path.join(root, "ctl", sources[cmd]))
            missing = [f for f in flags if "--" + f not in h.stdout]
            check(flags and not missing, "heraldctl help %s names its %d flags%s" % (
                cmd, len(flags), " (missing: %s)" % ", ".join(missing) if missing else ""))

    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
