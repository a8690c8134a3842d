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

import h2.config
import h2.exceptions
import h2.connection
import h2.events
import h2.settings
import jwt

import standin

TOKEN_RE = re.compile(r"^[0-9a-fA-F]{64,200}$")
PAYLOAD_MAX = 4096


class State(standin.ProviderState):
    def __init__(self, args):
        super().__init__(args)
        self.max_open = 0
        self.conns = 0  # connections open now
        self.max_conns = 0

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


class Connection:
    def __init__(self, st, reader, writer):
        self.st, self.reader, self.writer = st, reader, writer
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=cfg)
        self.streams = {}
        self.open = 0

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.writer.write(data)

    async def respond(self, sid, headers, body):
        st = self.st
        status, reason = st.answer(headers, bytes(body))
        if st.args.delay_ms > 0:
            await asyncio.sleep(st.args.delay_ms / 1000)
        apns_id = headers.get("apns-id") or str(uuid.uuid4())
        st.record("request", path=headers.get(":path"), status=status, reason=reason,
                  headers={k: v for k, v in headers.items() if k.startswith("apns-")},
                  body=body.decode("utf-8", "replace"))
        out = json.dumps({"reason": reason, "timestamp": int(time.time() * 1000)} if status == 410
                         else {"reason": reason}).encode() if reason else b""
        hdrs = [(":status", str(status)), ("apns-id", apns_id)]
        if out:
            hdrs.append(("content-type", "application/json"))
        try:
            self.conn.send_headers(sid, hdrs, end_stream=not out)
            if out:
                self.conn.send_data(sid, out, end_stream=True)
        except h2.exceptions.H2Error:
            pass  # the client reset the stream meanwhile
        self.open -= 1
        self.flush()

    async def run(self):
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS:
                                   self.st.args.max_streams})
        self.flush()
        while True:
            data = await self.reader.read(65536)
            if not data:
                break
            for ev in self.conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    self.streams[ev.stream_id] = (dict(ev.headers), bytearray())
                    self.open += 1
                    if self.open > self.st.max_open:
                        self.st.max_open = self.open
                        self.st.record("streams", max_open=self.open)
                elif isinstance(ev, h2.events.DataReceived):
                    self.streams[ev.stream_id][1].extend(ev.data)
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    headers, body = self.streams.pop(ev.stream_id)
                    asyncio.ensure_future(self.respond(ev.stream_id, headers, body))
                elif isinstance(ev, h2.events.StreamReset):
                    if self.streams.pop(ev.stream_id, None) is not None:
                        self.open -= 1
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    self.flush()
                    self.writer.close()
                    return
            self.flush()
            await self.writer.drain()
        self.writer.close()


async def serve(args):
    st = State(args)
    ctx = standin.server_tls(args, alpn=["h2"])

    async def on_client(reader, writer):
        st.conns += 1
        if st.conns > st.max_conns:
            st.max_conns = st.conns
            st.record("connections", max_open=st.conns)
        try:
            await Connection(st, reader, writer).run()
        finally:
            st.conns -= 1

    srv = await asyncio.start_server(on_client, args.host, args.port, ssl=ctx)
    standin.ready(srv.sockets[0].getsockname()[1])
    async with srv:
        await srv.serve_forever()


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
    asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
