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
-- given up (retried for events.hooks.retry_for_ms, or the endpoint was
-- disabled).  A redrive (POST /v1/hooks/{id}/redrive, heraldctl hooks
-- redrive) marks them; herald-hooks delivers the marked ones again, in
-- batches, and deletes each batch once delivered.

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
  created_at DATETIME(3)     NOT NULL DEFAULT UTC_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY hook_redrive (hook_id, redrive, id)
) ENGINE=InnoDB;
