#!/usr/bin/python3
"""apns_standin: an APNs provider API endpoint (HTTP/2 over TLS) on loopback,
for herald's integration tests.

POST /3/device/<token> with an ES256 provider token ("authorization: bearer
<jwt>", kid = --key-id, iss = --team-id, verified with --public-key) and
apns-topic.  Answers as Apple documents: 403 InvalidProviderToken (bad
signature, kid or iss), 403 ExpiredProviderToken (iat older than
--token-max-age), 400 BadDeviceToken (not 64..200 hex digits), 400
MissingTopic, 400 BadPayload (no JSON object with "aps"), 413
PayloadTooLarge (over 4096 bytes), 410 Unregistered for tokens in
--unregistered, else 200 with an apns-id header.  Advertises
SETTINGS_MAX_CONCURRENT_STREAMS = --max-streams, can hold each answer
--delay-ms, and records every request and the most streams ever open on
one connection (--record).
"""
import asyncio
import json
import re
import sys
import time
import uuid

import jwt

import standin

TOKEN_RE = re.compile(r"^[0-9a-fA-F]{64,200}$")
PAYLOAD_MAX = 4096


class State(standin.ProviderState):
    def check_token(self, auth):
        """None when AUTH is a valid provider token, else the APNs reason."""
        if not auth.startswith("bearer "):
            return "MissingProviderToken"
        tok = auth[7:]
        try:
            hdr = jwt.get_unverified_header(tok)
            claims = jwt.decode(tok, self.public_key, algorithms=["ES256"],
                                options={"require": ["iss", "iat"], "verify_iat": False})
        except jwt.InvalidTokenError:
            return "InvalidProviderToken"
        if hdr.get("kid") != self.args.key_id or claims["iss"] != self.args.team_id:
            return "InvalidProviderToken"
        if time.time() - claims["iat"] > self.args.token_max_age:
            return "ExpiredProviderToken"
        return None

    def answer(self, headers, body):
        """(status, reason or None) for one request."""
        path = headers.get(":path", "")
        device = path[len("/3/device/"):] if path.startswith("/3/device/") else ""
        reason = self.check_token(headers.get("authorization", ""))
        if headers.get(":method") != "POST":
            return 405, "MethodNotAllowed"
        if reason is not None:
            return 403, reason
        if not TOKEN_RE.match(device):
            return 400, "BadDeviceToken"
        if not headers.get("apns-topic"):
            return 400, "MissingTopic"
        if len(body) > PAYLOAD_MAX:
            return 413, "PayloadTooLarge"
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
                raise ValueError
        except ValueError:
            return 400, "BadPayload"
        if device in self.unregistered:
            return 410, "Unregistered"
        return 200, None

    async def respond(self, headers, body):
        """The handler of standin.Server: the answer, after --delay-ms."""
        status, reason = self.answer(headers, body)
        if self.args.delay_ms > 0:
            await asyncio.sleep(self.args.delay_ms / 1000)
        apns_id = headers.get("apns-id") or str(uuid.uuid4())
        self.record("request", path=headers.get(":path"), status=status, reason=reason,
                    headers={k: v for k, v in headers.items() if k.startswith("apns-")},
                    body=body.decode("utf-8", "replace"))
        out = json.dumps({"reason": reason, "timestamp": int(time.time() * 1000)} if status == 410
                         else {"reason": reason}).encode() if reason else b""
        hdrs = [("apns-id", apns_id)]
        if out:
            hdrs.append(("content-type", "application/json"))
        return status, hdrs, out


def main():
    p = standin.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--public-key", required=True, help="the .p8 key's public half (PEM)")
    p.add_argument("--key-id", required=True)
    p.add_argument("--team-id", required=True)
    p.add_argument("--token-max-age", type=float, default=3600)
    p.add_argument("--unregistered", action="append", help="a device token to answer 410")
    p.add_argument("--max-streams", type=int, default=1000)
    p.add_argument("--delay-ms", type=int, default=0)
    args = p.parse_args()
    standin.exit_after(args.max_seconds)
    st = State(args)
    asyncio.run(standin.Server(args, st.record, st.respond, max_streams=args.max_streams).serve())


if __name__ == "__main__":
    sys.exit(main())
