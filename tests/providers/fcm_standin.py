#!/usr/bin/python3
"""fcm_standin: an OAuth2 token endpoint and an FCM HTTP v1 send endpoint on
loopback, for herald's integration tests.

POST /token takes grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer and
an RS256 assertion, verified with --public-key (iss, scope, aud when
--audience is given, iat/exp); it answers {"access_token","expires_in",
"token_type":"Bearer"} with a lifetime of --token-life seconds, or 400
invalid_grant.  POST /v1/projects/<id>/messages:send wants a live token
(else 401 UNAUTHENTICATED, as FCM does when a token lapsed) and answers
404 UNREGISTERED for tokens in --unregistered, 400 INVALID_ARGUMENT on
message.token for tokens starting "invalid", 429 QUOTA_EXCEEDED with
Retry-After for the first --quota-429 sends, else 200.  Every token grant
and send is recorded (--record).
"""
import json
import secrets
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt

import standin

GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
MAX_BODY = 1 << 20


def fcm_error(code, status, error_code=None, field=None):
    details = []
    if error_code:
        details.append({"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                        "errorCode": error_code})
    if field:
        details.append({"@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [{"field": field, "description": "invalid"}]})
    return {"error": {"code": code, "message": status, "status": status, "details": details}}


class State(standin.ProviderState):
    def __init__(self, args):
        super().__init__(args)
        self.tokens = {}  # access token -> expiry (monotonic s)
        self.quota_left = args.quota_429
        self.sent = 0


class Handler(BaseHTTPRequestHandler):
    server_version = "fcm-standin"
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # quiet: tests read the record file
        pass

    def reply(self, code, obj, headers=()):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        if n < 0 or n > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(n)

    def do_POST(self):
        st = self.server.state
        try:
            data = self.body()
        except ValueError:
            self.reply(413, {"error": "too large"})
            return
        if self.path == "/token":
            self.token(st, data)
        elif self.path.startswith("/v1/projects/") and self.path.endswith("/messages:send"):
            self.send(st, data)
        else:
            self.reply(404, fcm_error(404, "NOT_FOUND"))

    def token(self, st, data):
        form = urllib.parse.parse_qs(data.decode("ascii", "replace"))
        if form.get("grant_type") != [GRANT] or len(form.get("assertion", [])) != 1:
            self.reply(400, {"error": "unsupported_grant_type"})
            return
        try:
            claims = jwt.decode(form["assertion"][0], st.public_key, algorithms=["RS256"],
                                audience=st.args.audience,
                                options={"verify_aud": st.args.audience is not None,
                                         "require": ["iss", "iat", "exp"]})
            if claims.get("scope") != SCOPE:
                raise jwt.InvalidTokenError("wrong scope")
            if claims["exp"] - claims["iat"] > 3600:
                raise jwt.InvalidTokenError("assertion valid for over an hour")
        except jwt.InvalidTokenError as e:
            st.record("token_refused", reason=str(e))
            self.reply(400, {"error": "invalid_grant", "error_description": str(e)})
            return
        tok = "ya29." + secrets.token_urlsafe(24)
        st.tokens[tok] = time.monotonic() + st.args.token_life
        st.record("token", iss=claims["iss"], access_token=tok)
        self.reply(200, {"access_token": tok, "expires_in": st.args.token_life,
                         "token_type": "Bearer"})

    def send(self, st, data):
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else ""
        if st.tokens.get(tok, 0) <= time.monotonic():
            st.record("send_unauthenticated", access_token=tok)
            self.reply(401, fcm_error(401, "UNAUTHENTICATED"))
            return
        try:
            msg = json.loads(data)["message"]
            device = msg["token"]
        except (ValueError, KeyError, TypeError):
            self.reply(400, fcm_error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "message"))
            return
        if st.quota_left > 0:
            st.quota_left -= 1
            st.record("send_quota", token=device)
            self.reply(429, fcm_error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"),
                       [("Retry-After", "1")])
        elif device in st.unregistered:
            st.record("send_unregistered", token=device)
            self.reply(404, fcm_error(404, "NOT_FOUND", "UNREGISTERED"))
        elif device.startswith("invalid"):
            st.record("send_invalid", token=device)
            self.reply(400, fcm_error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
                                      "message.token"))
        else:
            st.sent += 1
            st.record("send", token=device, message=msg)
            project = self.path.split("/")[3]
            self.reply(200, {"name": f"projects/{project}/messages/{st.sent}"})


def main():
    p = standin.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--public-key", required=True, help="the service account's public key (PEM)")
    p.add_argument("--audience", help="the token_uri assertions must name")
    p.add_argument("--token-life", type=int, default=3600)
    p.add_argument("--unregistered", action="append", help="a device token to answer 404")
    p.add_argument("--quota-429", type=int, default=0, help="answer 429 to the first N sends")
    args = p.parse_args()
    standin.exit_after(args.max_seconds)
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    srv.state = State(args)
    ctx = standin.server_tls(args)
    if ctx is not None:
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    standin.ready(srv.server_address[1])
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
