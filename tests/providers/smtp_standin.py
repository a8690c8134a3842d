#!/usr/bin/python3
"""smtp_standin: an SMTP relay (aiosmtpd) on loopback that checks the MIME it
receives, for herald's integration tests.

STARTTLS with --cert/--key (then required before anything else), AUTH
PLAIN as --user/--password (only over TLS; LOGIN is not offered).  RCPT TO an address in
--unknown answers "550 5.1.1 ... User unknown" (the address is dead), one in --refuse
"550 5.7.1 ... Message refused" (a permanent failure of this message); --greylist N answers the
first N transactions "451 4.7.1".  DATA is parsed as a MIME message and must
have From, To, Subject, Date, Message-ID and MIME-Version 1.0 and a text or
HTML part that decodes as UTF-8, else "554 5.6.0"; a valid message is
recorded (--record) with its decoded subject, parts and List-Unsubscribe
headers.
"""
import asyncio
import email
import email.policy
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

import standin

REQUIRED = ("From", "To", "Subject", "Date", "Message-ID")


def check_message(raw):
    """(fields, None) for an acceptable message, else (None, why)."""
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    for h in REQUIRED:
        if msg[h] is None:
            return None, f"no {h} header"
    if msg["MIME-Version"] != "1.0":
        return None, "MIME-Version is not 1.0"
    parts = {}
    for part in msg.walk():
        ctype = part.get_content_type()
        if ctype in ("text/plain", "text/html"):
            if part.get_content_charset() != "utf-8":
                return None, f"{ctype} is not UTF-8"
            try:
                parts[ctype] = part.get_payload(decode=True).decode("utf-8")
            except (UnicodeDecodeError, AttributeError):
                return None, f"{ctype} does not decode"
    if not parts:
        return None, "no text or HTML part"
    return {
        "from": str(msg["From"]), "to": str(msg["To"]), "subject": str(msg["Subject"]),
        "message_id": str(msg["Message-ID"]), "text": parts.get("text/plain"),
        "html": parts.get("text/html"),
        "list_unsubscribe": str(msg["List-Unsubscribe"]) if msg["List-Unsubscribe"] else None,
        "list_unsubscribe_post": (str(msg["List-Unsubscribe-Post"])
                                  if msg["List-Unsubscribe-Post"] else None),
        "multipart": msg.get_content_type(),
    }, None


class Handler:
    def __init__(self, args):
        self.args = args
        self.unknown = {a.lower() for a in (args.unknown or [])}
        self.refuse = {a.lower() for a in (args.refuse or [])}
        self.greylist_left = args.greylist
        self.record = standin.Recorder(args.record)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.lower() in self.unknown:
            self.record("rcpt_unknown", to=address)
            return f"550 5.1.1 <{address}>: Recipient address rejected: User unknown"
        if address.lower() in self.refuse:
            self.record("rcpt_refused", to=address)
            return f"550 5.7.1 <{address}>: Message refused by policy"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.greylist_left > 0:
            self.greylist_left -= 1
            self.record("greylisted", to=envelope.rcpt_tos)
            return "451 4.7.1 Greylisted, try again later"
        fields, why = check_message(envelope.original_content or envelope.content)
        if fields is None:
            self.record("refused", reason=why, to=envelope.rcpt_tos)
            return f"554 5.6.0 {why}"
        fields.update(mail_from=envelope.mail_from, rcpt_tos=envelope.rcpt_tos,
                      tls=session.ssl is not None,
                      login=(session.auth_data.login.decode()
                             if isinstance(session.auth_data, LoginPassword) else None))
        self.record("message", **fields)
        return "250 2.0.0 OK: queued"


def authenticator(args):
    def check(server, session, envelope, mechanism, auth_data):
        ok = (isinstance(auth_data, LoginPassword) and
              auth_data.login == args.user.encode() and auth_data.password == args.password.encode())
        # handled=False: aiosmtpd then answers 535 itself.
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)
    return check


async def serve(args):
    ctx = standin.server_tls(args)
    handler = Handler(args)
    auth = authenticator(args) if args.user else None

    def factory():
        return SMTP(handler, hostname="smtp-standin.test", tls_context=ctx,
                    require_starttls=ctx is not None, authenticator=auth,
                    auth_required=auth is not None, auth_require_tls=ctx is not None,
                    auth_exclude_mechanism=["LOGIN"],
                    data_size_limit=10 << 20)

    srv = await asyncio.get_running_loop().create_server(factory, args.host, args.port)
    standin.ready(srv.sockets[0].getsockname()[1])
    async with srv:
        await srv.serve_forever()


def main():
    p = standin.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--user", help="require AUTH as this user")
    p.add_argument("--password", default="")
    p.add_argument("--unknown", action="append", help="an address to refuse with 550 5.1.1")
    p.add_argument("--refuse", action="append",
                   help="an address to refuse with 550 5.7.1 (a permanent failure)")
    p.add_argument("--greylist", type=int, default=0, help="answer 451 to the first N messages")
    args = p.parse_args()
    standin.exit_after(args.max_seconds)
    asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
