"""standin: what the provider stand-ins share.

- make_ca(dir): a throw-away test CA and a server certificate for
  127.0.0.1 / localhost signed by it (ca.pem, server.pem, server.key);
- the common command line (--host, --port 0 = any free port, --cert/--key
  for TLS, --record FILE, --max-seconds);
- Recorder: one JSON object a line, appended and flushed per event, so a
  test reads what a stand-in saw while it runs;
- ready(port): the one line a stand-in prints on stdout once it listens,
  "READY port=<n>", which tests wait for;
- serve(): an HTTP server on asyncio that hands each request to the
  stand-in's handler, over HTTP/2 (h2 over TLS, as APNs and FCM speak it)
  and, for a stand-in that takes it, HTTP/1.1 too, as ALPN chooses.

Stand-ins run on loopback only, under /usr/bin/python3 (Debian's modules).
"""
import argparse
import asyncio
import datetime
import ipaddress
import json
import os
import ssl
import sys
import threading

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

try:  # Debian's python3-h2: the HTTP/2 server below (the smtp stand-in needs none)
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings
except ImportError:
    h2 = None

MAX_BODY = 1 << 20  # the largest request body the HTTP server reads


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(directory):
    """Writes ca.pem, server.pem and server.key into DIRECTORY; returns their paths."""
    now = datetime.datetime.now(datetime.timezone.utc)
    life = datetime.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder()
          .subject_name(_name("herald test CA")).issuer_name(_name("herald test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + life)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                       x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (x509.CertificateBuilder()
            .subject_name(_name("localhost")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + life)
            .add_extension(san, critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    paths = {n: os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key")}
    with open(paths["ca.pem"], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths["server.pem"], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths["server.key"], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths


def arg_parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    p.add_argument("--cert", help="server certificate (PEM); without it: plain text")
    p.add_argument("--key", help="its private key (PEM)")
    p.add_argument("--record", help="append one JSON line per event to this file")
    p.add_argument("--max-seconds", type=float, default=600,
                   help="exit after this long whatever happens (bounded tests)")
    return p


def server_tls(args, alpn=None):
    """An SSLContext for the server side, or None without --cert."""
    if not args.cert:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert, args.key)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


class Recorder:
    """Appends events as JSON lines to PATH (nothing when PATH is None)."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def __call__(self, event, **fields):
        if self.path is None:
            return
        fields["event"] = event
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(fields, sort_keys=True) + "\n")


class ProviderState:
    """What the push stand-ins start from: their arguments, the public key
    that verifies the tokens they are sent, the device tokens to answer as
    unregistered (--unregistered) and a Recorder."""

    def __init__(self, args):
        self.args = args
        with open(args.public_key, "rb") as f:
            self.public_key = f.read()
        self.unregistered = set(args.unregistered or [])
        self.record = Recorder(args.record)


def ready(port):
    print(f"READY port={port}", flush=True)


def exit_after(seconds):
    """Ends the process after SECONDS, so no stand-in outlives its test."""
    t = threading.Timer(seconds, lambda: os._exit(0))
    t.daemon = True
    t.start()


def read_lines(path):
    """The JSON events recorded in PATH so far."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class _H2:
    """One HTTP/2 connection: requests to HANDLER, at most MAX_STREAMS open."""

    def __init__(self, srv, reader, writer):
        self.srv, self.reader, self.writer = srv, reader, writer
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=cfg)
        self.streams = {}
        self.open = 0

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.writer.write(data)

    async def respond(self, sid, headers, body):
        status, hdrs, out = await self.srv.handler(headers, bytes(body))
        hdrs = [(":status", str(status))] + list(hdrs)
        try:
            self.conn.send_headers(sid, hdrs, end_stream=not out)
            if out:
                self.conn.send_data(sid, out, end_stream=True)
        except h2.exceptions.H2Error:
            pass  # the client reset the stream meanwhile
        self.open -= 1
        self.flush()

    async def run(self):
        srv = self.srv
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS:
                                   srv.max_streams})
        self.flush()
        while True:
            data = await self.reader.read(65536)
            if not data:
                break
            for ev in self.conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    self.streams[ev.stream_id] = (dict(ev.headers), bytearray())
                    self.open += 1
                    if self.open > srv.max_open:
                        srv.max_open = self.open
                        srv.record("streams", max_open=self.open)
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


async def _http1(srv, reader, writer):
    """HTTP/1.1 with keep-alive and Content-Length bodies: one request after
    the other to HANDLER, its headers as HTTP/2 would name them."""
    reasons = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
               413: "Payload Too Large", 429: "Too Many Requests"}
    while True:
        line = await reader.readline()
        if not line:
            break
        method, path, _ = line.decode("latin-1").split(" ", 2)
        headers = {":method": method, ":path": path}
        while True:
            h = (await reader.readline()).decode("latin-1").rstrip("\r\n")
            if not h:
                break
            name, _, value = h.partition(":")
            headers[name.strip().lower()] = value.strip()
        n = int(headers.get("content-length", "0"))
        if n < 0 or n > MAX_BODY:
            break
        body = await reader.readexactly(n)
        status, hdrs, out = await srv.handler(headers, body)
        head = "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n" % (status, reasons.get(status, "X"),
                                                             len(out))
        # HTTP/2's lower-case names written as HTTP/1.1 clients expect them.
        head += "".join("%s: %s\r\n" % ("-".join(w.capitalize() for w in k.split("-")), v)
                        for k, v in hdrs) + "\r\n"
        writer.write(head.encode("latin-1") + out)
        await writer.drain()
    writer.close()


class Server:
    """The stand-ins' HTTP server: HANDLER(headers, body) is awaited for each
    request (headers: a dict of ":method", ":path" and lower-case names)
    and returns (status, [(name, value)], body bytes).  HTTP/2 always, with
    SETTINGS_MAX_CONCURRENT_STREAMS = MAX_STREAMS; HTTP/1.1 as well when
    HTTP1 (chosen by ALPN over TLS; plain text without --cert).  Records
    the most streams ever open on one connection ("streams") and the most
    connections open at once ("connections").  PORT: where it listens,
    once it does."""

    def __init__(self, args, record, handler, max_streams=1000, http1=False):
        self.args, self.record, self.handler = args, record, handler
        self.max_streams, self.http1 = max_streams, http1
        self.max_open = 0
        self.conns = 0  # open now
        self.max_conns = 0
        self.port = None

    async def on_client(self, reader, writer):
        self.conns += 1
        if self.conns > self.max_conns:
            self.max_conns = self.conns
            self.record("connections", max_open=self.conns)
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            alpn = ssl_object.selected_alpn_protocol() if ssl_object else None
            if self.http1 and alpn != "h2":
                await _http1(self, reader, writer)
            else:
                await _H2(self, reader, writer).run()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            writer.close()
        finally:
            self.conns -= 1

    async def serve(self):
        ctx = server_tls(self.args, alpn=["h2", "http/1.1"] if self.http1 else ["h2"])
        srv = await asyncio.start_server(self.on_client, self.args.host, self.args.port, ssl=ctx)
        self.port = srv.sockets[0].getsockname()[1]
        ready(self.port)
        async with srv:
            await srv.serve_forever()


if __name__ == "__main__":
    sys.exit("standin.py is a module")
