-- The suppression list (docs/recipients.md): addresses herald must not
-- send to — unsubscribed (the address asked to leave), complained (a spam
-- report) or bounced (a hard bounce).  Checked at send, per address: a
-- recipient whose every address on the task's channel is suppressed ends
-- `suppressed`; mandatory categories skip only the `unsubscribed` ones.
--
-- Suppression is a property of an address, so it travels with the address
-- book: the address sync (004_address.sql) writes a suppressed address
-- into herald:addr:<uid> as "<platform> <app> <address> <reason>", and
-- the worker reads it with the addresses it fetches anyway, at no extra
-- round trip.  The triggers below record, in push_address_change, every
-- uid holding an address whose suppression changed.
CREATE TABLE IF NOT EXISTS push_suppression (
  platform   ENUM('fcm','apns','email','webhook') NOT NULL,
  app        VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  address    VARCHAR(512) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  reason     ENUM('unsubscribed','complained','bounced') NOT NULL,
  note       VARCHAR(255) NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (platform, app, address)
) ENGINE=InnoDB;

-- The uids of an address, for the triggers and the sync's join.
ALTER TABLE push_address ADD INDEX IF NOT EXISTS push_address_by_address (platform, app, address);

DROP TRIGGER IF EXISTS push_suppression_ins;
DROP TRIGGER IF EXISTS push_suppression_upd;
DROP TRIGGER IF EXISTS push_suppression_del;

CREATE TRIGGER push_suppression_ins AFTER INSERT ON push_suppression
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_address_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_address_change (epoch, uid)
    SELECT ep, uid FROM push_address
    WHERE platform = NEW.platform AND app = NEW.app AND address = NEW.address;
END;

CREATE TRIGGER push_suppression_upd AFTER UPDATE ON push_suppression
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_address_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_address_change (epoch, uid)
    SELECT ep, uid FROM push_address
    WHERE (platform = NEW.platform AND app = NEW.app AND address = NEW.address)
       OR (platform = OLD.platform AND app = OLD.app AND address = OLD.address);
END;

CREATE TRIGGER push_suppression_del AFTER DELETE ON push_suppression
FOR EACH ROW
BEGIN
  DECLARE ep BIGINT DEFAULT 0;
  SELECT epoch INTO ep FROM push_address_epoch WHERE id = 1 LOCK IN SHARE MODE;
  INSERT INTO push_address_change (epoch, uid)
    SELECT ep, uid FROM push_address
    WHERE platform = OLD.platform AND app = OLD.app AND address = OLD.address;
END;
