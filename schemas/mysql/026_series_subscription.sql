-- Subscribers of a series (docs/scheduling.md "Subscribers of a series",
-- docs/architecture.md "Series").
--
-- One row per series and uid, never one per occurrence: a 1M-subscriber
-- daily series writes no subscription row a day.  Membership is versioned
-- by time: an unsubscribe sets unsubscribed_at (the row stays), a
-- subscribe again sets subscribed_at anew and unsubscribed_at back to NULL.
-- An occurrence's recipients are its own push_subscription rows (if any)
-- and the series' subscribers at its claim (push_task.started_at):
--   subscribed_at <= started_at AND
--   (unsubscribed_at IS NULL OR unsubscribed_at > started_at)
-- which MySQL alone answers at any later time, so the reconciliation after
-- the claim, the finish's accounting, recover and the counts read the same
-- recipients without a row per occurrence (common/hr_subs.h,
-- HR_SUBS_SERIES_MEMBER).
--
-- The times are MySQL's, set by the triggers below whatever a statement
-- writes (an admin's raw INSERT needs no time): the time at which the row
-- was written under a shared lock of its push_series row, so that the
-- reconciliation after a claim (which takes that row's lock exclusively
-- first) sees every subscription with a time before the claim.  A plain
-- NOW(3) is the statement's start, which may lie before the claim while the
-- row commits after the reconciliation's read.
CREATE TABLE IF NOT EXISTS push_series_subscription (
  series_id       BIGINT UNSIGNED NOT NULL,
  uid             BIGINT UNSIGNED NOT NULL,
  subscribed_at   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
    COMMENT 'UTC; set by the trigger',
  unsubscribed_at DATETIME(3)     NULL DEFAULT NULL
    COMMENT 'UTC; NULL = subscribed; set by the trigger when a statement sets it',
  PRIMARY KEY (series_id, uid),
  -- the pull and the open event: which series a uid is in
  KEY push_series_subscription_uid (uid, series_id)
) ENGINE=InnoDB;

-- The intervals a subscribe again closed: the row keeps one interval, so
-- an occurrence claimed within an earlier one (and still running, or
-- recovered, or accounted later) finds the uid here.  Written by the
-- UPDATE trigger below; a uid is a subscriber at an instant by at most one
-- of its intervals.  A row whose unsubscribed_at is older than the claim
-- of every occurrence of its series still kept (not purged: a finished
-- one's counts and a failed one's recover read it too) is read no more.
CREATE TABLE IF NOT EXISTS push_series_subscription_past (
  series_id       BIGINT UNSIGNED NOT NULL,
  uid             BIGINT UNSIGNED NOT NULL,
  subscribed_at   DATETIME(3)     NOT NULL,
  unsubscribed_at DATETIME(3)     NOT NULL,
  PRIMARY KEY (series_id, uid, subscribed_at),
  KEY push_series_subscription_past_uid (uid, series_id)
) ENGINE=InnoDB;

-- Drips (docs/scheduling.md "Drips"): a series with drip_days is a daily
-- series whose occurrence of day D takes only the subscribers whose
-- subscribed_at falls on day D - drip_days in the series' zone ("3 days
-- after subscribing, at 10:00").  The dispatcher writes that day's bounds,
-- as instants, on each occurrence it writes (drip_from, drip_until): the
-- recipients' predicate then needs no zone arithmetic in SQL.
ALTER TABLE push_series
  ADD COLUMN IF NOT EXISTS drip_days INT NULL DEFAULT NULL
    COMMENT 'a drip: an occurrence takes the subscribers of the day this many days before its own; NULL = every subscriber';
ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS drip_from DATETIME(3) NULL DEFAULT NULL
    COMMENT 'an occurrence of a drip: the subscriptions it takes start at this instant (UTC)',
  ADD COLUMN IF NOT EXISTS drip_until DATETIME(3) NULL DEFAULT NULL
    COMMENT 'and end before this one';

DROP TRIGGER IF EXISTS push_series_subscription_guard;
DROP TRIGGER IF EXISTS push_series_subscription_guard_change;

-- UTC at the moment the trigger runs: SYSDATE is the execution's time (NOW
-- the statement's start) in the session's zone, which an admin's session
-- may have set to anything; the difference of the two is the time since
-- the statement started, whatever the zone.
CREATE TRIGGER push_series_subscription_guard BEFORE INSERT ON push_series_subscription
FOR EACH ROW
BEGIN
  DECLARE found BIGINT DEFAULT NULL;
  DECLARE msg VARCHAR(255);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET found = NULL;
  SELECT id INTO found FROM push_series WHERE id = NEW.series_id LOCK IN SHARE MODE;
  IF found IS NULL THEN
    SET msg = CONCAT('push_series ', NEW.series_id,
        ' does not exist: create the series before its subscriptions');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.unsubscribed_at IS NOT NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
        'push_series_subscription: a new row is a subscription (unsubscribed_at NULL)';
  END IF;
  SET NEW.subscribed_at = UTC_TIMESTAMP(3) + INTERVAL TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) MICROSECOND;
END;

-- An UPDATE that sets unsubscribed_at unsubscribes (now); one that sets it
-- back to NULL subscribes again (subscribed_at = now, the closed interval
-- kept in push_series_subscription_past); anything else keeps
-- the times (a subscribe of a subscriber, an unsubscribe of one who left).
CREATE TRIGGER push_series_subscription_guard_change BEFORE UPDATE ON push_series_subscription
FOR EACH ROW
BEGIN
  DECLARE found BIGINT DEFAULT NULL;
  DECLARE now3 DATETIME(3);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET found = NULL;
  IF NEW.series_id <> OLD.series_id OR NEW.uid <> OLD.uid THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
        'push_series_subscription: series_id and uid cannot change (unsubscribe, then subscribe)';
  END IF;
  SELECT id INTO found FROM push_series WHERE id = NEW.series_id LOCK IN SHARE MODE;
  SET now3 = UTC_TIMESTAMP(3) + INTERVAL TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) MICROSECOND;
  IF OLD.unsubscribed_at IS NULL AND NEW.unsubscribed_at IS NOT NULL THEN
    SET NEW.subscribed_at = OLD.subscribed_at, NEW.unsubscribed_at = now3;
  ELSEIF OLD.unsubscribed_at IS NOT NULL AND NEW.unsubscribed_at IS NULL THEN
    INSERT IGNORE INTO push_series_subscription_past (series_id, uid, subscribed_at, unsubscribed_at)
      VALUES (OLD.series_id, OLD.uid, OLD.subscribed_at, OLD.unsubscribed_at);
    SET NEW.subscribed_at = now3;
  ELSE
    SET NEW.subscribed_at = OLD.subscribed_at, NEW.unsubscribed_at = OLD.unsubscribed_at;
  END IF;
END;
