-- A/B tests with a winner step (docs/api.md "A/B tests: test then winner",
-- issue 32): the arms go to a sample of the recipients only; the rest wait
-- in the task's wait set until wait_s after the sample finished, then get
-- the content of the arm the metric picks.  NULL ab_sample_pct: no winner
-- step (every recipient gets its arm at once).  The owner writes
-- ab_sampled_at once (the sample's last chunk done), then ab_winner,
-- ab_decided_at and ab_figures once (UPDATE ... WHERE ab_winner IS NULL),
-- so a dispatcher that dies after the pick leaves the next owner the same
-- winner.
ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS ab_sample_pct TINYINT UNSIGNED NULL DEFAULT NULL
    COMMENT 'percentage of recipients (by a hash of task and uid) that get the arms; 1..99',
  ADD COLUMN IF NOT EXISTS ab_wait_s INT UNSIGNED NULL DEFAULT NULL
    COMMENT 'seconds from the sample''s end to the pick',
  ADD COLUMN IF NOT EXISTS ab_metric ENUM('click', 'open', 'delivered') NULL DEFAULT NULL
    COMMENT 'what picks the winner: click rate, open rate or delivered rate',
  ADD COLUMN IF NOT EXISTS ab_sampled_at DATETIME(3) NULL DEFAULT NULL
    COMMENT 'when the owner saw the sample''s last chunk done',
  ADD COLUMN IF NOT EXISTS ab_winner VARCHAR(35) CHARACTER SET ascii NULL DEFAULT NULL
    COMMENT 'the winning arm''s name, or default; written once',
  ADD COLUMN IF NOT EXISTS ab_decided_at DATETIME(3) NULL DEFAULT NULL,
  ADD COLUMN IF NOT EXISTS ab_figures TEXT NULL DEFAULT NULL
    COMMENT 'JSON: the per-arm figures the pick read';
