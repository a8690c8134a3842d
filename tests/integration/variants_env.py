"""variants_env: what the per-locale variant tests share (test_variants.py,
test_series_variants.py): the profiles' locales and the variants they get,
the content each recipient must receive, the channels, raw SQL rows of
variants, and the bad variants every create refuses."""
import json
import os
import random
import sys

from badinput_env import Env, Receiver, check, finish, wait_until
from provider_env import KEYS

SYNC_WAIT_S = 15  # the dispatcher's profile sync runs every 5 s
# recipient k's profile locale (None: no profile) and the variant it gets
KINDS = [("pt-BR", "pt-BR"), ("pt-PT", "pt"), ("de-AT", "de"), ("fr-FR", "default"),
         (None, "default")]
VARIANTS = [
    {"locale": "pt-BR", "title": "Olá {{uid}}", "body": "corpo {{payload.tag}}",
     "payload": {"tag": "br"}},
    {"locale": "pt", "title": "Olá PT {{uid}}"},  # body and payload: the task's
    {"locale": "de", "title": "Hallo {{uid}}", "body": "Text {{payload.tag}}",
     "payload": {"tag": "de"}},
]
TITLE, BODY, PAYLOAD = "Hello {{uid}}", "text {{payload.tag}}", {"tag": "en"}


def expected(variant, uid):
    """(title, body) the recipient UID of VARIANT must receive."""
    if variant == "default":
        return ("Hello %d" % uid, "text en")
    v = next(x for x in VARIANTS if x["locale"] == variant)
    tag = v.get("payload", PAYLOAD)["tag"]
    title = v.get("title", TITLE).replace("{{uid}}", str(uid))
    return (title, v.get("body", BODY).replace("{{payload.tag}}", tag))


def want_counts(n, outcome):
    """The counts per variant of N recipients (kind k % 5 each) whose
    outcome is OUTCOME, as variant_counts shows them."""
    want = {}
    for k in range(n):
        want[KINDS[k % 5][1]] = want.get(KINDS[k % 5][1], 0) + 1
    return {v: {outcome: n} for v, n in want.items()}


def variant_rows(owner):
    """VARIANTS as SQL rows (OWNER, vkey, title, body, payload)."""
    rows = []
    for v in VARIANTS:
        cols = [owner, "'%s'" % v["locale"]]
        for f in ("title", "body"):
            cols.append("'%s'" % v[f] if f in v else "NULL")
        cols.append("'%s'" % json.dumps(v["payload"]) if "payload" in v else "NULL")
        rows.append("(%s)" % ", ".join(cols))
    return rows


def channels(rx):
    """Webhooks hooka and hookb to RX's paths a and b, and an fcm channel
    (never reached: its limits are checked at create time)."""
    return {"hooka": {"url": rx.url("a")}, "hookb": {"url": rx.url("b")},
            "fcm": {"type": "fcm", "url": "https://127.0.0.1:9",
                    "service_account_file": os.path.join(KEYS, "service_account.json"),
                    "token_uri": "https://127.0.0.1:9/token"}}


def start_with_profiles(env, dispatcher, worker, cfg, uids):
    """Profiles of UIDS (uid k a KINDS[k % 5] locale, or none) in push_user,
    the daemons started, and the profiles waited for in Redis.  Returns the
    dispatcher's and the worker's processes."""
    env.sql("INSERT INTO push_user (uid, locale) VALUES %s" % ",".join(
        "(%d, '%s')" % (u, KINDS[k % 5][0]) for k, u in enumerate(uids)
        if KINDS[k % 5][0] is not None))
    dsp, wk = env.start_daemons(dispatcher, worker, cfg)
    last = uids[len(uids) - 3]  # a de-AT profile: the last one written
    check(wait_until(lambda: env.r.cmd("HGET", "%suser:%d" % (env.prefix, last), "locale")
                     == "de-AT", SYNC_WAIT_S, 0.3), "the profiles reach Redis (sync)")
    return dsp, wk


# (what, variants, words of the message): refused by every create, 400
# invalid_variant
BAD_VARIANTS = [
    ("not a language tag", [{"locale": "p", "title": "x"}], "language tag"),
    ("'default' as a locale", [{"locale": "default"}], "language tag"),
    ("a locale twice", [{"locale": "de"}, {"locale": "DE"}], "appears twice"),
    ("unknown field", [{"locale": "de", "colour": "red"}], "unknown field"),
    ("not an array", {"locale": "de"}, "not an array"),
    ("payload not an object", [{"locale": "de", "payload": [1]}], "JSON object"),
    ("subject on a webhook", [{"locale": "de", "subject": "s"}], "smtp channels"),
    ("a bad template", [{"locale": "de", "title": "{{oops"}], "template"),
]


def main(doc, name, uid_base, n, tests):
    """A variant test's main: argv HERALD_DISPATCHER HERALD_WORKER HERALDCTL
    (DOC printed otherwise), an Env NAME, a webhook receiver, N uids from
    UID_BASE (plus a random offset) with profiles, the daemons; then
    TESTS(env, rx, ctl, cfg, uids), the daemons stopped, everything of the
    test deleted.  The exit status: 2 usage, 77 no Kafka topic, else
    finish()'s."""
    if len(sys.argv) != 4:
        print(doc)
        return 2
    dispatcher, worker, ctl = sys.argv[1:]
    env = Env(name)
    rx = Receiver(lambda path, body: (200, b"{}"))
    base = uid_base + random.randrange(1 << 30) * 1_000
    uids = [base + k for k in range(n)]
    try:
        cfg = env.config(channels(rx))
        if not env.create_topic():
            return 77
        dsp, wk = start_with_profiles(env, dispatcher, worker, cfg, uids)
        tests(env, rx, ctl, cfg, uids)
        check(env.stop(wk) == 0, "worker stops cleanly")
        check(env.stop(dsp) == 0, "dispatcher stops cleanly")
    finally:
        rx.stop()
        env.drop_users(base, base + n)
        env.sql("DELETE FROM push_job WHERE name = 'series:%s'" % env.topic, strict=False)
        env.cleanup()
        env.sql("DELETE FROM push_series WHERE topic = '%s'" % env.topic, strict=False)
    return finish()
