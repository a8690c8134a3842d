-- The tasks finished since an instant (dispatcher/dsp_sweep.c
-- "dsp_sweep_retire", docs/architecture.md "Key retention"): the retirement
-- pass gives each finish's Redis keys their expiry once, paging by
-- (finished_at, id) from a cursor.  With this index a sweep's page is a
-- range read of the next 100 finishes in that order (InnoDB's secondary
-- index carries the primary key, so the order is the index's); without it
-- every sweep would read every finished task the table holds and sort them.
ALTER TABLE push_task
  ADD INDEX IF NOT EXISTS push_task_finished (finished_at);
