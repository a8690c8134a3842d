#!/usr/bin/python3
"""smtpload: the most messages/s an SMTP relay on loopback takes, for
bench/run's smtp scenario (its ceiling, as wrk and h2load are for HTTP).

    smtpload.py --port P --ca CA.pem --user U --password PW
                --connections C --seconds S

C threads each open one connection (STARTTLS verified with CA, AUTH
PLAIN) and, once all are up, send one MIME message after the other on it
for S seconds: a
UTF-8 subject, text and HTML parts and a List-Unsubscribe header, about
the size of the mails herald's smtp channel builds.  Prints one JSON line:
messages, messages_per_s, refused, connections, seconds and the client's
own CPU seconds (a ceiling is only one while the client is not the
bottleneck).
"""
import argparse
import json
import os
import smtplib
import ssl
import sys
import threading
import time
from email.message import EmailMessage


UID = b"1000000000042"  # where each message's number goes


def template():
    """One message built with the email package, its number UID; the
    senders replace UID in its bytes, so the client's cost per message stays
    small against the relay's."""
    m = EmailMessage()
    m["From"] = "Herald <noreply@herald.test>"
    m["To"] = "u%s@bench.test" % UID.decode()
    m["Subject"] = "Reminder: your reminder ✓"
    m["Message-ID"] = "<smtpload.%s@herald.test>" % UID.decode()
    m["Date"] = "Thu, 01 Jan 2026 00:00:00 +0000"
    m["List-Unsubscribe"] = "<https://herald.test/unsub/%s>" % UID.decode()
    m.set_content("Hello, the live show starts now\n", charset="utf-8", cte="base64")
    m.add_alternative("<p>Hello, the live show starts now</p>\n", subtype="html",
                      charset="utf-8", cte="base64")
    return m.as_bytes()


def sender(a, ctx, msg, ready, stop, counts, k):
    with smtplib.SMTP("127.0.0.1", a.port, timeout=10) as s:
        s.starttls(context=ctx)
        s.login(a.user, a.password)
        ready.wait(30)
        i = 0
        while not stop.is_set():
            i += 1
            uid = b"%013d" % (k * 10 ** 9 + i)
            try:
                s.sendmail("noreply@herald.test", ["u%s@bench.test" % uid.decode()],
                           msg.replace(UID, uid))
                counts[k][0] += 1
            except smtplib.SMTPResponseException:
                counts[k][1] += 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--seconds", type=float, default=10)
    a = p.parse_args()
    ctx = ssl.create_default_context(cafile=a.ca)
    stop = threading.Event()
    counts = [[0, 0] for _ in range(a.connections)]
    # the clock starts once every connection is up and authenticated, as
    # herald's keep theirs from one mail to the next
    ready = threading.Barrier(a.connections + 1)
    msg = template()
    threads = [threading.Thread(target=sender, args=(a, ctx, msg, ready, stop, counts, k),
                                daemon=True) for k in range(a.connections)]
    for t in threads:
        t.start()
    ready.wait(30)
    t0, cpu0 = time.monotonic(), os.times()
    time.sleep(a.seconds)
    stop.set()
    for t in threads:
        t.join(30)
    secs = time.monotonic() - t0
    cpu1 = os.times()
    sent = sum(c[0] for c in counts)
    print(json.dumps({"messages": sent, "messages_per_s": round(sent / secs, 1),
                      "refused": sum(c[1] for c in counts), "connections": a.connections,
                      "seconds": round(secs, 2),
                      "client_cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 2)}))
    return 0 if sent and not any(t.is_alive() for t in threads) else 1


if __name__ == "__main__":
    sys.exit(main())
