-- Recipients' profiles and preferences (docs/recipients.md): MySQL is the
-- truth, Redis's hash herald:user:<uid> the mirror workers, templates and
-- local-time plans read — kept in step the way the address book is
-- (004_address.sql, common/hr_mirror.c): triggers record the uid of every
-- changed row with the current epoch; the dispatchers' sync rewrites the
-- hashes of the changed uids, or of every uid when Redis lost its mark.
--
-- A profile: the zone (an IANA name, checked against the system's tzdata
-- by herald; a raw-SQL value herald does not know is left out of Redis and
-- counted, never read as UTC silently), the locale (a BCP 47 tag), free
-- attributes (a JSON object whose top-level keys become the hash's fields,
-- templates' user.<key>; at most recipients.attributes_max_bytes), and the
-- user's own quiet hours (local times in the profile's zone; both or
-- neither; end exclusive, may wrap midnight).
CREATE TABLE IF NOT EXISTS push_user (
  uid         BIGINT UNSIGNED NOT NULL,
  tz          VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
  locale      VARCHAR(35) CHARACTER SET ascii COLLATE ascii_bin NULL,
  attributes  JSON NULL,
  quiet_start TIME NULL,
  quiet_end   TIME NULL,
  created_at  DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at  DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (uid),
  CONSTRAINT push_user_quiet CHECK ((quiet_start IS NULL) = (quiet_end IS NULL))
) ENGINE=InnoDB;

-- Opt-outs: a row says the uid receives nothing of CATEGORY by channels of
-- type CHANNEL (webhook, fcm, apns, smtp); '*' stands for every category or
-- every channel type (('*', '*') = nothing but mandatory categories).
-- source: who wrote it (the admin API or heraldctl, the app's client-token
-- API, the one-click unsubscribe link, raw SQL).
CREATE TABLE IF NOT EXISTS push_user_pref (
  uid        BIGINT UNSIGNED NOT NULL,
  category   VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  channel    VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  source     ENUM('admin','app','unsubscribe','sql') NOT NULL DEFAULT 'sql',
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (uid, category, channel),
  CONSTRAINT push_user_pref_user FOREIGN KEY (uid) REFERENCES push_user (uid) ON DELETE CASCADE
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS push_user_epoch (
  id    TINYINT UNSIGNED NOT NULL,
  epoch BIGINT NOT NULL DEFAULT 1,
  PRIMARY KEY (id)
) ENGINE=InnoDB;

INSERT IGNORE INTO push_user_epoch (id, epoch) VALUES (1, 1);

-- Kept a week, as push_address_change (the mark expires after a day).
CREATE TABLE IF NOT EXISTS push_user_change (
  id    BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  epoch BIGINT NOT NULL,
  uid   BIGINT UNSIGNED NOT NULL,
  at    DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY push_user_change_epoch (epoch, id),
  KEY push_user_change_at (at)
) ENGINE=InnoDB;

DROP TRIGGER IF EXISTS push_user_ins;
DROP TRIGGER IF EXISTS push_user_upd;
DROP TRIGGER IF EXISTS push_user_del;
DROP TRIGGER IF EXISTS push_user_pref_ins;
DROP TRIGGER IF EXISTS push_user_pref_upd;
DROP TRIGGER IF EXISTS push_user_pref_del;

CREATE TRIGGER push_user_ins AFTER INSERT ON push_user
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_user_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_user_change (epoch, uid) VALUES (ep, NEW.uid);
END;

CREATE TRIGGER push_user_upd AFTER UPDATE ON push_user
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_user_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_user_change (epoch, uid) VALUES (ep, NEW.uid);
  IF NEW.uid <> OLD.uid THEN
    INSERT INTO push_user_change (epoch, uid) VALUES (ep, OLD.uid);
  END IF;
END;

-- A deleted profile's preferences go with it (ON DELETE CASCADE, which
-- fires no trigger): this one records the uid for both.
CREATE TRIGGER push_user_del AFTER DELETE ON push_user
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_user_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_user_change (epoch, uid) VALUES (ep, OLD.uid);
END;

CREATE TRIGGER push_user_pref_ins AFTER INSERT ON push_user_pref
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_user_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_user_change (epoch, uid) VALUES (ep, NEW.uid);
END;

CREATE TRIGGER push_user_pref_upd AFTER UPDATE ON push_user_pref
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_user_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_user_change (epoch, uid) VALUES (ep, NEW.uid);
  IF NEW.uid <> OLD.uid THEN
    INSERT INTO push_user_change (epoch, uid) VALUES (ep, OLD.uid);
  END IF;
END;

CREATE TRIGGER push_user_pref_del AFTER DELETE ON push_user_pref
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_user_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_user_change (epoch, uid) VALUES (ep, OLD.uid);
END;
