-- The audit log (docs/api.md "Audit log"): one row per change a person
-- made, through the API, the console or heraldctl: who (actor, role), when,
-- what (action, task_id, target), from where (peer) and the fields it
-- changed (before_json, after_json).  herald writes the row in the same
-- transaction as the change where the change is a MySQL write, so a change
-- that committed has its row.
--
-- Rows are append-only: the triggers refuse every UPDATE, and every DELETE
-- except the retention purge's (`heraldctl audit purge`), which sets the
-- session variable @herald_audit_purge = 'retention' for its own DELETEs
-- only, and even then not of a row younger than 30 days.  The variable is
-- not a secret: it keeps herald's own statements and an operator's stray
-- SQL from changing the log, not a database user who may drop triggers
-- (docs/operations.md "Audit log": give the daemons a user without the
-- TRIGGER and DROP privileges, and ship the rows elsewhere for tamper
-- evidence).  TRUNCATE is DDL and runs no trigger: it needs DROP.

CREATE TABLE IF NOT EXISTS push_audit (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  at          DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  actor       VARCHAR(200)  NOT NULL
              COMMENT 'token:<name>, bootstrap:<n>, jwt:<subject>, cli:<user>, insecure',
  role        ENUM('viewer','operator','admin') NULL COMMENT 'NULL: heraldctl (database access)',
  via         ENUM('api','console','cli') NOT NULL,
  action      VARCHAR(100)  NOT NULL COMMENT 'the route, or the heraldctl command',
  task_id     BIGINT UNSIGNED NULL,
  target      VARCHAR(200)  NULL COMMENT 'the object other than a task: uid 42, token 7, job 3',
  peer        VARCHAR(300)  NOT NULL COMMENT 'the client address, or host:<name> of heraldctl',
  before_json LONGTEXT      NULL CHECK (before_json IS NULL OR JSON_VALID(before_json)),
  after_json  LONGTEXT      NULL CHECK (after_json IS NULL OR JSON_VALID(after_json)),
  PRIMARY KEY (id),
  KEY push_audit_at (at),
  KEY push_audit_task (task_id, id),
  KEY push_audit_actor (actor, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

DROP TRIGGER IF EXISTS push_audit_no_update;

CREATE TRIGGER push_audit_no_update BEFORE UPDATE ON push_audit
FOR EACH ROW
  SIGNAL SQLSTATE '45000'
    SET MESSAGE_TEXT = 'push_audit is append-only: its rows never change';

DROP TRIGGER IF EXISTS push_audit_no_delete;

CREATE TRIGGER push_audit_no_delete BEFORE DELETE ON push_audit
FOR EACH ROW
BEGIN
  IF NOT (@herald_audit_purge <=> 'retention') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
      'push_audit is append-only: only the retention purge (heraldctl audit purge) deletes rows';
  END IF;
  IF OLD.at > UTC_TIMESTAMP(3) - INTERVAL 30 DAY THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
      'push_audit: a row younger than 30 days is kept, even by the retention purge';
  END IF;
END;
