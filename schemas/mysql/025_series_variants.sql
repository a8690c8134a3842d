-- Per-locale variants of a series (docs/scheduling.md "Series", issue 32).
--
-- push_task_variant's columns (022_variants.sql, 023_rich_split.sql) keyed
-- by the series: push_series' own title, body and payload are the default,
-- a row here the content of one locale (or, with split, an A/B arm).  The
-- dispatcher copies the series' rows into push_task_variant for each
-- occurrence it writes, in the transaction of the occurrence's insert
-- (dispatcher/dsp_series.c): an occurrence already written (the unique key
-- of (series_id, occurrence_at)) is not copied again, and a change of
-- these rows reaches the occurrences written after it, not those before.
-- Rows may be written with raw SQL; the dispatcher checks them with the
-- series (hr_variant_check): a bad row fails the series with last_error.
CREATE TABLE IF NOT EXISTS push_series_variant (
  id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  series_id BIGINT UNSIGNED NOT NULL,
  split     TINYINT UNSIGNED NULL DEFAULT NULL
    COMMENT 'an A/B arm''s percentage 1..100; NULL = a locale variant',
  vkey      VARCHAR(35) CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL
    COMMENT 'the variant''s name: its locale, a BCP 47 tag; unique per series, case-insensitive',
  title     TEXT NULL COMMENT 'template; NULL = the series''',
  body      TEXT NULL COMMENT 'template; NULL = the series''',
  payload   MEDIUMTEXT NULL COMMENT 'JSON object; NULL = the series''',
  subject   TEXT NULL COMMENT 'smtp: subject template; NULL = the channel''s',
  text      MEDIUMTEXT NULL COMMENT 'smtp: text part template; NULL = the channel''s',
  html      MEDIUMTEXT NULL COMMENT 'smtp: HTML part template; NULL = the channel''s',
  UNIQUE KEY series_vkey (series_id, vkey)
) ENGINE=InnoDB;
