#!/usr/bin/python3
"""h2peer: an HTTP/2 server over TLS on loopback that misbehaves on
request, for the HTTP/2 engine's tests (tests/integration/test_h2.c).

The request's path says what it gets:
  /ok               200, body "ok", an apns-id header
  /status/<code>    <code> with a JSON body {"reason":"R<code>"}; a 429
                    also carries retry-after: 7
  /rst              RST_STREAM(INTERNAL_ERROR), no answer
  /refused          RST_STREAM(REFUSED_STREAM), no answer
  /silent           never answered
  /drop             response headers and 10 of 1,000 body bytes, then a
                    TCP reset of the whole connection
  /big              200 with a 1 MiB body
  /bighead          200 with a 40,000-byte header
  /maxopen          200, the body the most streams ever open at once on
                    one connection (as text)
--max-streams sets SETTINGS_MAX_CONCURRENT_STREAMS; --delay-ms holds every
answer; --goaway-after N: on each connection, once N requests arrived, a
GOAWAY whose last-stream-id is that of the (N/2)-th request: the streams
up to it are answered, the others ignored, and the connection is closed
once they are answered.  Prints "READY port=<n>" (standin.ready).
"""
import asyncio
import socket
import struct
import sys
import uuid

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

import standin


class Peer:
    def __init__(self, args):
        self.args = args
        self.max_open = 0


class Connection:
    def __init__(self, peer, reader, writer):
        self.peer, self.reader, self.writer = peer, reader, writer
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=cfg)
        self.open = set()
        self.received = []  # stream ids in arrival order
        self.last = None  # the GOAWAY's last-stream-id once sent
        self.pending = 0  # answers below last not yet sent

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.writer.write(data)

    def send(self, sid, status, body=b"", extra=()):
        hdrs = [(":status", str(status)), ("apns-id", str(uuid.uuid4()))] + list(extra)
        try:
            self.conn.send_headers(sid, hdrs, end_stream=not body)
            if body:
                # Within the stream's and connection's windows, in frames.
                while body:
                    room = min(self.conn.local_flow_control_window(sid),
                               self.conn.max_outbound_frame_size)
                    if room <= 0:
                        return body
                    self.conn.send_data(sid, body[:room], end_stream=len(body) <= room)
                    body = body[room:]
        except h2.exceptions.H2Error:
            pass  # the client reset the stream meanwhile
        return b""

    async def send_all(self, sid, status, body, extra=()):
        rest = self.send(sid, status, body, extra)
        while rest:
            self.flush()
            await self.writer.drain()
            await asyncio.sleep(0.01)
            try:
                room = min(self.conn.local_flow_control_window(sid),
                           self.conn.max_outbound_frame_size)
                if room > 0:
                    self.conn.send_data(sid, rest[:room], end_stream=len(rest) <= room)
                    rest = rest[room:]
            except h2.exceptions.H2Error:
                return

    async def respond(self, sid, path):
        args = self.peer.args
        if args.delay_ms > 0:
            await asyncio.sleep(args.delay_ms / 1000)
        if path == "/silent":
            return
        if path in ("/rst", "/refused"):
            code = (h2.errors.ErrorCodes.INTERNAL_ERROR if path == "/rst"
                    else h2.errors.ErrorCodes.REFUSED_STREAM)
            try:
                self.conn.reset_stream(sid, error_code=code)
            except h2.exceptions.H2Error:
                pass
        elif path == "/drop":
            self.conn.send_headers(sid, [(":status", "200"), ("content-length", "1000")])
            self.conn.send_data(sid, b"x" * 10)
            self.flush()
            await self.writer.drain()
            sock = self.writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.writer.transport.abort()
            return
        elif path == "/big":
            await self.send_all(sid, 200, b"b" * (1 << 20))
        elif path == "/bighead":
            self.send(sid, 200, b"", [("x-big", "h" * 40000)])
        elif path == "/maxopen":
            self.send(sid, 200, str(self.peer.max_open).encode())
        elif path.startswith("/status/"):
            code = int(path[len("/status/"):])
            extra = [("retry-after", "7")] if code == 429 else []
            self.send(sid, code, b'{"reason":"R%d"}' % code, extra)
        else:
            self.send(sid, 200, b"ok")
        self.open.discard(sid)
        self.flush()
        if self.last is not None and sid <= self.last:
            self.pending -= 1
            if self.pending == 0:
                await self.writer.drain()
                self.writer.close()

    def goaway(self):
        n = self.peer.args.goaway_after
        self.last = self.received[n // 2 - 1]
        self.pending = sum(1 for s in self.received if s <= self.last and s in self.open)
        # Written past h2's state machine, which would refuse the streams
        # the client sent before it saw the GOAWAY (those are ignored here).
        self.flush()
        self.writer.write(struct.pack(">I", 8)[1:] + bytes([7, 0]) + struct.pack(">III", 0,
                                                                             self.last, 0))
        if self.pending == 0:
            self.writer.close()

    async def run(self):
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS:
                                   self.peer.args.max_streams})
        self.flush()
        paths = {}
        while True:
            data = await self.reader.read(65536)
            if not data:
                break
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.flush()
                break
            for ev in events:
                if isinstance(ev, h2.events.RequestReceived):
                    hdrs = dict(ev.headers)
                    paths[ev.stream_id] = hdrs.get(":path", "/")
                    self.open.add(ev.stream_id)
                    self.peer.max_open = max(self.peer.max_open, len(self.open))
                elif isinstance(ev, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    if self.last is not None and ev.stream_id > self.last:
                        continue  # refused by the GOAWAY: never answered
                    self.received.append(ev.stream_id)
                    asyncio.ensure_future(self.respond(ev.stream_id, paths.pop(ev.stream_id)))
                    if (self.peer.args.goaway_after and self.last is None
                            and len(self.received) >= self.peer.args.goaway_after):
                        self.goaway()
                elif isinstance(ev, h2.events.StreamReset):
                    self.open.discard(ev.stream_id)
            self.flush()
            await self.writer.drain()
        self.writer.close()


async def serve(args):
    peer = Peer(args)
    ctx = standin.server_tls(args, alpn=["h2"])

    async def on_client(reader, writer):
        try:
            await Connection(peer, reader, writer).run()
        except (ConnectionError, OSError):
            pass

    srv = await asyncio.start_server(on_client, args.host, args.port, ssl=ctx)
    standin.ready(srv.sockets[0].getsockname()[1])
    async with srv:
        await srv.serve_forever()


def main():
    p = standin.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--max-streams", type=int, default=100)
    p.add_argument("--delay-ms", type=int, default=0)
    p.add_argument("--goaway-after", type=int, default=0)
    args = p.parse_args()
    standin.exit_after(args.max_seconds)
    asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
