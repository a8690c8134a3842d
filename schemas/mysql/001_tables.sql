-- herald tables.  All times are UTC (herald sets time_zone='+00:00' on every
-- connection); DATETIME(3) keeps milliseconds.

CREATE TABLE IF NOT EXISTS push_task (
  id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  -- written by admins (SQL, API or heraldctl)
  name              VARCHAR(200)  NOT NULL,
  topic             VARCHAR(100)  NOT NULL DEFAULT 'default',
  channel           VARCHAR(64)   NOT NULL,
  title             TEXT          NOT NULL DEFAULT '',
  body              TEXT          NOT NULL DEFAULT '',
  -- validated by the dispatcher (a JSON object), not by a CHECK, so that a
  -- bad value becomes a failed task with a readable last_error
  payload           MEDIUMTEXT    NULL,
  due_at            DATETIME(3)   NULL,
  freeze_at         DATETIME(3)   NULL COMMENT 'NULL = 00:00 UTC of the due day',
  rate_limit        INT           NOT NULL DEFAULT 0 COMMENT 'pushes/s across the cluster, 0 = channel default',
  chunk_size        INT           NOT NULL DEFAULT 5000,
  throttle_limit    INT           NOT NULL DEFAULT 0 COMMENT '0 = no throttle',
  throttle_window_s INT           NOT NULL DEFAULT 0,
  throttle_scope    VARCHAR(100)  NULL COMMENT 'NULL = topic',
  throttle_key      VARCHAR(100)  NULL,
  throttle_mode     ENUM('enforce','shadow') NULL COMMENT 'NULL = the channel''s mode',
  control           ENUM('run','pause','cancel') NOT NULL DEFAULT 'run',
  -- written by herald only
  state             ENUM('scheduled','dispatching','dispatched','done','paused','cancelled','failed')
                    NOT NULL DEFAULT 'scheduled',
  last_error        VARCHAR(1000) NULL,
  claimed_by        VARCHAR(128)  NULL,
  lease_until       DATETIME(3)   NULL,
  total             BIGINT        NOT NULL DEFAULT 0,
  sent              BIGINT        NOT NULL DEFAULT 0,
  failed            BIGINT        NOT NULL DEFAULT 0,
  throttled         BIGINT        NOT NULL DEFAULT 0,
  pulled            BIGINT        NOT NULL DEFAULT 0,
  cancelled         BIGINT        NOT NULL DEFAULT 0,
  retried           BIGINT        NOT NULL DEFAULT 0,
  created_at        DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at        DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  started_at        DATETIME(3)   NULL COMMENT 'first claim',
  dispatched_at     DATETIME(3)   NULL,
  finished_at       DATETIME(3)   NULL COMMENT 'done, cancelled or failed',
  PRIMARY KEY (id),
  KEY push_task_state_due (state, due_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The durable mirror of every Redis subscriber set (dual storage).
CREATE TABLE IF NOT EXISTS push_subscription (
  task_id    BIGINT UNSIGNED NOT NULL,
  uid        BIGINT UNSIGNED NOT NULL,
  created_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task_id, uid),
  KEY push_subscription_uid (uid)
) ENGINE=InnoDB;

-- One row per chunk, written when its first publish is confirmed.
CREATE TABLE IF NOT EXISTS push_chunk (
  task_id      BIGINT UNSIGNED NOT NULL,
  seq          INT UNSIGNED    NOT NULL,
  size         INT UNSIGNED    NOT NULL,
  state        ENUM('published','done','parked','cancelled') NOT NULL DEFAULT 'published',
  published_at DATETIME(3)     NOT NULL,
  done_at      DATETIME(3)     NULL,
  worker       VARCHAR(128)    NULL,
  publishes    INT UNSIGNED    NOT NULL DEFAULT 1,
  PRIMARY KEY (task_id, seq)
) ENGINE=InnoDB;

-- Optional per-recipient log (worker.delivery_log), written in bulk.  One
-- row per recipient: a redelivery overwrites it, so recovery can subtract
-- the delivered recipients with one join.
CREATE TABLE IF NOT EXISTS push_delivery (
  task_id     BIGINT UNSIGNED NOT NULL,
  uid         BIGINT UNSIGNED NOT NULL,
  status      ENUM('sent','failed','throttled','pulled','cancelled') NOT NULL,
  attempts    SMALLINT UNSIGNED NOT NULL DEFAULT 1,
  http_status SMALLINT UNSIGNED NULL,
  latency_ms  INT UNSIGNED    NULL,
  at          DATETIME(3)     NOT NULL,
  PRIMARY KEY (task_id, uid)
) ENGINE=InnoDB;
