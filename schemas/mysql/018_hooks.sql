-- Event webhooks (docs/api.md "Event webhooks"; herald-hooks, hooks/): the
-- endpoints that get the events topic's events, signed, and what could not
-- be delivered to them.
--
-- push_hook: an endpoint.  types is the comma-separated list of event
-- types it wants ('' = every type, also those added later); secret is its
-- Standard Webhooks signing secret (whsec_...).  state: enabled, or
-- disabled (by an operator, or by herald-hooks after failing for
-- events.hooks.disable_after_ms: disabled_reason says which); a disabled
-- endpoint gets nothing, its matching events go to its dead letters.
-- failing_since: the first failure since its last success (NULL: healthy).
--
-- push_hook_dead: the per-endpoint dead letters: events whose delivery was
-- given up (retried for events.hooks.retry_for_ms, the endpoint's queue
-- full, or the endpoint disabled), at most events.hooks.dead_letter_max
-- per endpoint.  A redrive (POST /v1/hooks/{id}/redrive, heraldctl hooks
-- redrive) marks them (redrive = 1); a herald-hooks process claims a batch
-- of marked rows (claimed_by, claimed_until: another process takes over a
-- claim that ran out), delivers it once the endpoint is enabled, and
-- deletes the rows once delivered.

CREATE TABLE IF NOT EXISTS push_hook (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  url             VARCHAR(2048)   NOT NULL,
  description     VARCHAR(256)    NOT NULL DEFAULT '',
  types           VARCHAR(1024)   NOT NULL DEFAULT '' COMMENT 'comma-separated event types; empty = all',
  secret          VARCHAR(128)    NOT NULL COMMENT 'whsec_<base64>',
  state           ENUM('enabled','disabled') NOT NULL DEFAULT 'enabled',
  disabled_reason VARCHAR(512)    NULL,
  failing_since   DATETIME(3)     NULL,
  created_at      DATETIME(3)     NOT NULL DEFAULT UTC_TIMESTAMP(3),
  updated_at      DATETIME(3)     NOT NULL DEFAULT UTC_TIMESTAMP(3),
  PRIMARY KEY (id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS push_hook_dead (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  hook_id    BIGINT UNSIGNED NOT NULL,
  event_id   VARCHAR(64)     NOT NULL,
  uid        BIGINT UNSIGNED NOT NULL,
  payload    TEXT            NOT NULL COMMENT 'the event, as published',
  error      VARCHAR(512)    NOT NULL,
  redrive    TINYINT(1)      NOT NULL DEFAULT 0,
  claimed_by VARCHAR(192)    NULL,
  claimed_until DATETIME(3)  NULL,
  created_at DATETIME(3)     NOT NULL DEFAULT UTC_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY hook_redrive (hook_id, redrive, id)
) ENGINE=InnoDB;
