"""herald_test.recipients: the recipients section the tests of issue 28's
features share (docs/recipients.md): the three categories every such test
names (reminder, marketing, security mandatory) and the unsubscribe links'
keys."""


def recipients_yaml(keys, token_ttl_s=None, attributes_max_bytes=None):
    """The top-level `recipients:` block of a herald.yaml: KEYS the
    unsubscribe keys, (id, secret) pairs, the first the one that signs;
    TOKEN_TTL_S and ATTRIBUTES_MAX_BYTES written when given."""
    lines = ["recipients:",
             "  categories:",
             "    - {name: reminder}",
             "    - {name: marketing}",
             "    - {name: security, mandatory: true}"]
    if attributes_max_bytes is not None:
        lines.append("  attributes_max_bytes: %d" % attributes_max_bytes)
    lines += ["  unsubscribe:",
              "    public_url: https://herald.test"]
    if token_ttl_s is not None:
        lines.append("    token_ttl_s: %d" % token_ttl_s)
    lines.append("    keys:")
    lines += ['      - {id: %s, secret: "%s"}' % (kid, secret) for kid, secret in keys]
    return "\n".join(lines) + "\n"
