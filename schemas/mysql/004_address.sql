-- The recipients' address book: where a uid is reached on each platform
-- (docs/architecture.md, "Addresses").  MySQL is the truth, Redis the
-- working copy the workers read (herald:addr:<uid>, one SET per uid).
--
-- A uid may hold several addresses per platform and app (one token per
-- device).  app is the FCM project id or the APNs bundle topic, '' for
-- email and webhook.  app and address are ASCII with binary collation: FCM
-- and APNs tokens are case-sensitive, and the unique key fits InnoDB's
-- index limit that way.  hr_addr_check (common/hr_addr.c) validates what
-- the API and heraldctl store; a row an admin inserted by hand that it
-- refuses is left out of Redis and logged by the sync, never pushed to.

CREATE TABLE IF NOT EXISTS push_address (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  uid        BIGINT UNSIGNED NOT NULL,
  platform   ENUM('fcm','apns','email','webhook') NOT NULL,
  app        VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  address    VARCHAR(512) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY push_address_unique (uid, platform, app, address),
  CONSTRAINT push_address_nonempty CHECK (address <> '')
) ENGINE=InnoDB;

-- Why a change log: admins also INSERT, UPDATE and DELETE push_address rows
-- with raw SQL, and a deleted row leaves nothing to find.  The triggers
-- below record the uid of every changed row, stamped with the current
-- epoch of push_address_epoch, read under a shared lock.  The sync
-- (hr_addr_sync) bumps the epoch first, which waits for the writers in
-- flight and stamps later changes with the new epoch, then rewrites the
-- Redis set of every uid changed in the epochs it has not synced yet from
-- the rows MySQL holds: a deletion leaves no stale address behind.  The
-- same epoch pattern as the subscription guard (003).
CREATE TABLE IF NOT EXISTS push_address_epoch (
  id    TINYINT UNSIGNED NOT NULL,
  epoch BIGINT NOT NULL DEFAULT 1,
  PRIMARY KEY (id)
) ENGINE=InnoDB;

INSERT IGNORE INTO push_address_epoch (id, epoch) VALUES (1, 1);

-- A change row is kept a week (the sync drops older ones): the synced mark
-- in Redis expires after a day without a sync, and a Redis restored from
-- an older snapshot carries an older mark, so whatever mark a sync finds
-- names changes that are still here — or none, and it reloads everything.
CREATE TABLE IF NOT EXISTS push_address_change (
  id    BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  epoch BIGINT NOT NULL,
  uid   BIGINT UNSIGNED NOT NULL,
  at    DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY push_address_change_epoch (epoch, id),
  KEY push_address_change_at (at)
) ENGINE=InnoDB;

DROP TRIGGER IF EXISTS push_address_ins;
DROP TRIGGER IF EXISTS push_address_upd;
DROP TRIGGER IF EXISTS push_address_del;

CREATE TRIGGER push_address_ins AFTER INSERT ON push_address
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_address_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_address_change (epoch, uid) VALUES (ep, NEW.uid);
END;

CREATE TRIGGER push_address_upd AFTER UPDATE ON push_address
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_address_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_address_change (epoch, uid) VALUES (ep, NEW.uid);
  IF NEW.uid <> OLD.uid THEN
    INSERT INTO push_address_change (epoch, uid) VALUES (ep, OLD.uid);
  END IF;
END;

CREATE TRIGGER push_address_del AFTER DELETE ON push_address
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_address_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_address_change (epoch, uid) VALUES (ep, OLD.uid);
END;
