#!/usr/bin/python3
"""fcm_standin: an OAuth2 token endpoint and an FCM HTTP v1 send endpoint on
loopback (HTTP/2 over TLS, and HTTP/1.1 as ALPN chooses, as Google's
servers do), for herald's integration tests.

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
import asyncio
import json
import secrets
import sys
import time
import urllib.parse

import jwt

import standin

GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"


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


def reply(code, obj, headers=()):
    """(status, headers, body) of a JSON answer, for standin.Server."""
    return code, [("content-type", "application/json; charset=UTF-8")] + list(headers), \
        json.dumps(obj).encode()


class Handler:
    """The requests: POST /token and POST /v1/projects/<id>/messages:send."""

    def __init__(self, st):
        self.st = st

    async def __call__(self, headers, data):
        path = headers.get(":path", "")
        if headers.get(":method") != "POST":
            return reply(405, fcm_error(405, "METHOD_NOT_ALLOWED"))
        if path == "/token":
            return self.token(data)
        if path.startswith("/v1/projects/") and path.endswith("/messages:send"):
            return self.send(path, headers, data)
        return reply(404, fcm_error(404, "NOT_FOUND"))

    def token(self, data):
        st = self.st
        form = urllib.parse.parse_qs(data.decode("ascii", "replace"))
        if form.get("grant_type") != [GRANT] or len(form.get("assertion", [])) != 1:
            return reply(400, {"error": "unsupported_grant_type"})
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
            return reply(400, {"error": "invalid_grant", "error_description": str(e)})
        tok = "ya29." + secrets.token_urlsafe(24)
        st.tokens[tok] = time.monotonic() + st.args.token_life
        st.record("token", iss=claims["iss"], access_token=tok)
        return reply(200, {"access_token": tok, "expires_in": st.args.token_life,
                           "token_type": "Bearer"})

    def send(self, path, headers, data):
        st = self.st
        auth = headers.get("authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else ""
        if st.tokens.get(tok, 0) <= time.monotonic():
            st.record("send_unauthenticated", access_token=tok)
            return reply(401, fcm_error(401, "UNAUTHENTICATED"))
        try:
            msg = json.loads(data)["message"]
            device = msg["token"]
        except (ValueError, KeyError, TypeError):
            return reply(400, fcm_error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "message"))
        if st.quota_left > 0:
            st.quota_left -= 1
            st.record("send_quota", token=device)
            return reply(429, fcm_error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"),
                         [("retry-after", "1")])
        if device in st.unregistered:
            st.record("send_unregistered", token=device)
            return reply(404, fcm_error(404, "NOT_FOUND", "UNREGISTERED"))
        if device.startswith("invalid"):
            st.record("send_invalid", token=device)
            return reply(400, fcm_error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
                                        "message.token"))
        st.sent += 1
        st.record("send", token=device, message=msg)
        project = path.split("/")[3]
        return reply(200, {"name": f"projects/{project}/messages/{st.sent}"})


def main():
    p = standin.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--public-key", required=True, help="the service account's public key (PEM)")
    p.add_argument("--audience", help="the token_uri assertions must name")
    p.add_argument("--token-life", type=int, default=3600)
    p.add_argument("--unregistered", action="append", help="a device token to answer 404")
    p.add_argument("--quota-429", type=int, default=0, help="answer 429 to the first N sends")
    args = p.parse_args()
    standin.exit_after(args.max_seconds)
    st = State(args)
    # HTTP/2, as FCM and Google's token endpoint speak it, and HTTP/1.1 for
    # plain clients (ALPN chooses).
    asyncio.run(standin.Server(args, st.record, Handler(st), http1=True).serve())

if __name__ == "__main__":
    sys.exit(main())
