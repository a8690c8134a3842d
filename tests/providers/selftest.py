#!/usr/bin/python3
"""selftest: each provider stand-in started on loopback with TLS from a
throw-away CA and driven by a plain Python client, so the integration tests
that later point herald at them start from stand-ins known to answer as the
real services do.  Usage: selftest.py KEYS_DIR (tests/unit/keys).  Exits 77
(skipped) when Debian's python3-h2 / python3-aiosmtpd / python3-jwt are
missing."""
import json
import os
import select
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import aiosmtpd  # noqa: F401  (the stand-in needs it)
    import h2.connection
    import h2.events
    import h2.settings
    import jwt
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

import smtplib
from email.message import EmailMessage

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import standin  # noqa: E402

TIMEOUT = 10
DEVICE = "0a1b2c3d" * 8
DEAD = "deadbeef" * 8


class Standin:
    """A stand-in process; its port once it printed READY; killed on exit."""

    def __init__(self, script, args, record):
        self.record = record
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, script),
                                      "--max-seconds", "60", "--record", record] + args,
                                     stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("READY port="):
            self.close()
            raise RuntimeError(f"{script} did not start: {line!r}")
        self.port = int(line.split("=")[1])

    def events(self, name):
        return [e for e in standin.read_lines(self.record) if e["event"] == name]

    def close(self):
        self.proc.kill()
        self.proc.wait(TIMEOUT)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


def read(keys, name):
    with open(os.path.join(keys, name), "rb") as f:
        return f.read()


def http_post(ctx, url, data, headers):
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=TIMEOUT) as r:
            return r.status, json.loads(r.read() or b"{}"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), dict(e.headers)


def fcm(keys, tmp, ctx, ca):
    uri = "https://127.0.0.1:{}/token"
    with Standin("fcm_standin.py", ["--cert", ca["server.pem"], "--key", ca["server.key"],
                                    "--public-key", os.path.join(keys, "rsa_pub.pem"),
                                    "--unregistered", "tok-dead", "--quota-429", "1"],
                 os.path.join(tmp, "fcm.jsonl")) as s:
        token_uri = uri.format(s.port)
        now = int(time.time())
        claims = {"iss": "herald@herald-test.iam.gserviceaccount.com", "aud": token_uri,
                  "scope": "https://www.googleapis.com/auth/firebase.messaging",
                  "iat": now, "exp": now + 3600}
        form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="
        good = jwt.encode(claims, read(keys, "rsa.pem"), algorithm="RS256")
        forged = jwt.encode(claims, read(keys, "rsa1024.pem"), algorithm="RS256")
        ctype = {"Content-Type": "application/x-www-form-urlencoded"}
        st, body, _ = http_post(ctx, token_uri, (form + forged).encode(), ctype)
        check(st == 400 and body["error"] == "invalid_grant", "fcm: forged assertion refused")
        st, body, _ = http_post(ctx, token_uri, (form + good).encode(), ctype)
        check(st == 200 and body["token_type"] == "Bearer" and body["expires_in"] == 3600,
              "fcm: assertion traded for an access token")
        send = f"https://127.0.0.1:{s.port}/v1/projects/herald-test/messages:send"
        auth = {"Authorization": "Bearer " + body["access_token"],
                "Content-Type": "application/json"}

        def msg(tok):
            return json.dumps({"message": {"token": tok, "notification": {"title": "t"}}}).encode()

        st, _, hdrs = http_post(ctx, send, msg("tok-1"), auth)
        check(st == 429 and hdrs.get("Retry-After") == "1", "fcm: 429 with Retry-After first")
        st, body, _ = http_post(ctx, send, msg("tok-1"), auth)
        check(st == 200 and body["name"].startswith("projects/herald-test/messages/"),
              "fcm: message sent")
        st, body, _ = http_post(ctx, send, msg("tok-dead"), auth)
        check(st == 404 and body["error"]["details"][0]["errorCode"] == "UNREGISTERED",
              "fcm: unregistered token answered 404 UNREGISTERED")
        st, body, _ = http_post(ctx, send, msg("invalid-x"), auth)
        check(st == 400 and body["error"]["details"][1]["fieldViolations"][0]["field"]
              == "message.token", "fcm: invalid token answered 400 on message.token")
        st, _, _ = http_post(ctx, send, msg("tok-1"), dict(auth, Authorization="Bearer nope"))
        check(st == 401, "fcm: unknown access token answered 401")
        check(len(s.events("send")) == 1, "fcm: one delivery recorded")


def h2_requests(port, ctx, requests):
    """Sends REQUESTS ([(headers, body)]) on one HTTP/2 connection; returns
    [(status, reason)] in order and the server's max concurrent streams."""
    ctx.set_alpn_protocols(["h2"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), TIMEOUT),
                           server_hostname="localhost")
    check(sock.selected_alpn_protocol() == "h2", "apns: ALPN negotiated h2")
    conn = h2.connection.H2Connection()
    conn.initiate_connection()
    ids = []
    for headers, body in requests:
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, headers)
        conn.send_data(sid, body, end_stream=True)
        ids.append(sid)
    sock.sendall(conn.data_to_send())
    status, data, done, max_streams = {}, {}, set(), None
    deadline = time.monotonic() + TIMEOUT
    while len(done) < len(ids) and time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            break
        for ev in conn.receive_data(chunk):
            if isinstance(ev, h2.events.ResponseReceived):
                status[ev.stream_id] = int(dict(ev.headers)[b":status"])
            elif isinstance(ev, h2.events.DataReceived):
                data[ev.stream_id] = data.get(ev.stream_id, b"") + ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                done.add(ev.stream_id)
            elif isinstance(ev, h2.events.RemoteSettingsChanged):
                cs = ev.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
                if cs is not None:
                    max_streams = cs.new_value
        sock.sendall(conn.data_to_send())
    sock.close()
    return [(status.get(i), json.loads(data[i]).get("reason") if i in data else None)
            for i in ids], max_streams


def apns(keys, tmp, ctx, ca):
    with Standin("apns_standin.py", ["--cert", ca["server.pem"], "--key", ca["server.key"],
                                     "--public-key", os.path.join(keys, "ec_pub.pem"),
                                     "--key-id", "ABC123DEFG", "--team-id", "TEAM123456",
                                     "--unregistered", DEAD, "--max-streams", "7"],
                 os.path.join(tmp, "apns.jsonl")) as s:
        p8 = read(keys, "ec.p8")
        now = int(time.time())
        good = jwt.encode({"iss": "TEAM123456", "iat": now}, p8, algorithm="ES256",
                          headers={"kid": "ABC123DEFG"})
        old = jwt.encode({"iss": "TEAM123456", "iat": now - 4000}, p8, algorithm="ES256",
                         headers={"kid": "ABC123DEFG"})
        other = jwt.encode({"iss": "OTHERTEAM1", "iat": now}, p8, algorithm="ES256",
                           headers={"kid": "ABC123DEFG"})
        body = json.dumps({"aps": {"alert": {"title": "t", "body": "b"}}}).encode()

        def req(token, device, topic="com.example.app"):
            h = [(":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
                 (":path", "/3/device/" + device), ("authorization", "bearer " + token),
                 ("apns-push-type", "alert")]
            return (h + [("apns-topic", topic)] if topic else h), body

        got, max_streams = h2_requests(s.port, ctx, [
            req(good, DEVICE), req(good, DEAD), req(good, "xyz"), req(old, DEVICE),
            req(other, DEVICE), req(good, DEVICE, topic=None)])
        check(max_streams == 7, "apns: SETTINGS_MAX_CONCURRENT_STREAMS advertised")
        check(got == [(200, None), (410, "Unregistered"), (400, "BadDeviceToken"),
                      (403, "ExpiredProviderToken"), (403, "InvalidProviderToken"),
                      (400, "MissingTopic")], f"apns: answers as Apple documents ({got})")
        check(len([e for e in s.events("request") if e["status"] == 200]) == 1,
              "apns: one delivery recorded")


def smtp(tmp, ctx, ca):
    with Standin("smtp_standin.py", ["--cert", ca["server.pem"], "--key", ca["server.key"],
                                     "--user", "herald", "--password", "s3cret",
                                     "--unknown", "nobody@example.org"],
                 os.path.join(tmp, "smtp.jsonl")) as s:
        m = EmailMessage()
        m["From"] = "Herald <noreply@herald.test>"
        m["To"] = "alice@example.org"
        m["Subject"] = "Réunion ✓"
        m["Message-ID"] = "<t1.u1@herald.test>"
        m["Date"] = "Thu, 26 Nov 2026 16:32:35 +0000"
        m["List-Unsubscribe"] = "<https://herald.test/u/1>"
        m["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
        m.set_content("Hello Alice")
        m.add_alternative("<p>Hello Alice</p>", subtype="html")
        with smtplib.SMTP("127.0.0.1", s.port, timeout=TIMEOUT) as c:
            try:
                c.login("herald", "s3cret")
                check(False, "smtp: AUTH refused before STARTTLS")
            except smtplib.SMTPException:
                check(True, "smtp: AUTH refused before STARTTLS")
        with smtplib.SMTP("127.0.0.1", s.port, timeout=TIMEOUT) as c:
            c.starttls(context=ctx)
            try:
                c.login("herald", "wrong")
                check(False, "smtp: wrong password refused")
            except smtplib.SMTPAuthenticationError:
                check(True, "smtp: wrong password refused")
            c.login("herald", "s3cret")
            c.send_message(m)
            try:
                c.send_message(m, to_addrs=["nobody@example.org"])
                check(False, "smtp: unknown mailbox refused")
            except smtplib.SMTPRecipientsRefused as e:
                code, text = e.recipients["nobody@example.org"]
                check(code == 550 and text.startswith(b"5.1.1"),
                      "smtp: unknown mailbox refused with 550 5.1.1")
            try:
                c.sendmail("noreply@herald.test", ["alice@example.org"],
                           b"Subject: x\r\n\r\nno MIME\r\n")
                check(False, "smtp: a message without MIME headers refused")
            except smtplib.SMTPDataError as e:
                check(e.smtp_code == 554, "smtp: a message without MIME headers refused")
        got = s.events("message")
        check(len(got) == 1 and got[0]["subject"] == "Réunion ✓" and got[0]["tls"]
              and got[0]["text"].strip() == "Hello Alice" and got[0]["login"] == "herald"
              and got[0]["list_unsubscribe_post"] == "List-Unsubscribe=One-Click",
              "smtp: MIME message received and decoded over TLS")


def main():
    keys = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "unit", "keys")
    with tempfile.TemporaryDirectory(prefix="herald-standin-") as tmp:
        ca = standin.make_ca(tmp)
        ctx = ssl.create_default_context(cafile=ca["ca.pem"])
        fcm(keys, tmp, ctx, ca)
        apns(keys, tmp, ssl.create_default_context(cafile=ca["ca.pem"]), ca)
        smtp(tmp, ctx, ca)
    print("all stand-ins answer as expected")


if __name__ == "__main__":
    main()
