#!/usr/bin/env python3
"""webpush_standin: a web push service (RFC 8030) on loopback over TLS, for
herald's integration tests; HTTP/2 and HTTP/1.1 as ALPN chooses.

POST /push/<id> is a push to subscription <id> of --subscriptions (a JSON
file {"<id>": {"private": <the user agent's P-256 private key, base64url>,
"auth": <its auth secret, base64url>}}).  Each request is checked as a
push service would and more:
  - Authorization "vapid t=<jwt>, k=<key>" (RFC 8292): the JWT's signature
    verified with py_vapid against k, k equal to --public-key's point, aud
    the origin the request came to, exp in the future and within 24 hours,
    sub equal to --subject; else 401 (403 when k is another key);
  - TTL present (RFC 8030 5.2), Urgency one of RFC 8030's, Topic at most 32
    base64url characters; else 400;
  - Content-Encoding aes128gcm and a body that http_ece decrypts with the
    subscription's private key and auth secret (RFC 8291); else 400 with
    "undecryptable" recorded;
  - an <id> in --gone answers 410; the first --slow requests answer 429
    with Retry-After: --retry-after; the rest 201 Created.
Every request is recorded (--record) with its status, headers and the
decrypted plaintext.

Runs under the venv of tests/providers/webpush-venv (py_vapid, http_ece,
and Debian's h2 through system site-packages).
"""
import asyncio
import base64
import json
import sys
import time

import http_ece
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import serialization
from py_vapid import jwt as vapid_jwt

import standin

URGENCY = {"very-low", "low", "normal", "high"}
TOPIC_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class State:
    def __init__(self, args):
        self.args = args
        self.record = standin.Recorder(args.record)
        with open(args.public_key, "rb") as f:
            pub = serialization.load_pem_public_key(f.read())
        self.k = base64.urlsafe_b64encode(pub.public_bytes(
            serialization.Encoding.X962,
            serialization.PublicFormat.UncompressedPoint)).rstrip(b"=").decode()
        with open(args.subscriptions, encoding="utf-8") as f:
            subs = json.load(f)
        self.subs = {i: (ec.derive_private_key(int.from_bytes(b64d(s["private"]), "big"),
                                               ec.SECP256R1()), b64d(s["auth"]))
                     for i, s in subs.items()}
        self.gone = set(args.gone or [])
        self.slow_left = args.slow
        self.server = None  # the standin.Server, for the origin it listens on

    def check_vapid(self, auth):
        """None when AUTH is valid VAPID for this service, else (status, why)."""
        scheme, _, rest = auth.partition(" ")
        if scheme.lower() != "vapid":
            return 401, "not vapid"
        params = {}
        for part in rest.split(","):
            name, _, value = part.strip().partition("=")
            params[name] = value
        if "t" not in params or "k" not in params:
            return 401, "t or k missing"
        try:
            claims = vapid_jwt.decode(params["t"], params["k"])
        except Exception as e:  # py_vapid raises InvalidSignature and others
            return 401, "bad signature: %r" % (e,)
        if params["k"] != self.k:
            return 403, "another key"
        now = time.time()
        if claims.get("aud") != "https://%s:%d" % (self.args.host, self.server.port):
            return 401, "aud %r" % claims.get("aud")
        if not (now < claims.get("exp", 0) <= now + 86400):
            return 401, "exp %r" % claims.get("exp")
        if claims.get("sub") != self.args.subject:
            return 401, "sub %r" % claims.get("sub")
        return None

    def answer(self, headers, body):
        """(status, why, plaintext) for one request."""
        path = headers.get(":path", "")
        sid = path[len("/push/"):] if path.startswith("/push/") else None
        if headers.get(":method") != "POST" or sid not in self.subs:
            return 404, "no such subscription", None
        bad = self.check_vapid(headers.get("authorization", ""))
        if bad is not None:
            return bad[0], bad[1], None
        if not headers.get("ttl", "").isdigit():
            return 400, "TTL", None
        if headers.get("urgency", "normal") not in URGENCY:
            return 400, "Urgency", None
        topic = headers.get("topic")
        if topic is not None and not (0 < len(topic) <= 32 and set(topic) <= TOPIC_CHARS):
            return 400, "Topic", None
        if headers.get("content-encoding") != "aes128gcm":
            return 400, "Content-Encoding", None
        if len(body) > 4096:
            return 413, "payload too large", None
        key, auth = self.subs[sid]
        try:
            plain = http_ece.decrypt(body, private_key=key, auth_secret=auth,
                                     version="aes128gcm")
        except Exception as e:  # http_ece.ECEException, cryptography's InvalidTag
            return 400, "undecryptable: %r" % (e,), None
        if sid in self.gone:
            return 410, "gone", plain
        if self.slow_left > 0:
            self.slow_left -= 1
            return 429, "slow", plain
        return 201, None, plain

    async def respond(self, headers, body):
        status, why, plain = self.answer(headers, body)
        self.record("request", path=headers.get(":path"), status=status, why=why,
                    at=time.time(),
                    headers={k: headers[k] for k in ("ttl", "urgency", "topic",
                                                     "content-encoding") if k in headers},
                    plaintext=plain.decode("utf-8", "replace") if plain is not None else None)
        hdrs = [("location", "/message/%d" % time.monotonic_ns())] if status == 201 else []
        if status == 429:
            hdrs.append(("retry-after", str(self.args.retry_after)))
        return status, hdrs, b""


def main():
    p = standin.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--public-key", required=True, help="the VAPID key's public half (PEM)")
    p.add_argument("--subject", required=True, help="the VAPID sub expected")
    p.add_argument("--subscriptions", required=True, help="JSON: id -> private key, auth")
    p.add_argument("--gone", action="append", help="a subscription id to answer 410")
    p.add_argument("--slow", type=int, default=0, help="answer this many requests 429")
    p.add_argument("--retry-after", type=int, default=1)
    args = p.parse_args()
    standin.exit_after(args.max_seconds)
    st = State(args)
    st.server = standin.Server(args, st.record, st.respond, http1=True)
    asyncio.run(st.server.serve())


if __name__ == "__main__":
    sys.exit(main())
