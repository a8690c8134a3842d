-- Web push subscriptions in the address book (docs/providers.md, "Web
-- push"): platform 'webpush', app '', address "<endpoint>#<p256dh>.<auth>"
-- (common/hr_wpsub.h).  The suppression list takes them too.  A row an
-- admin inserted by hand with a bad endpoint or bad keys is refused by
-- hr_addr_check when the sync reads it: left out of Redis, logged, never
-- pushed to (004_address.sql).

ALTER TABLE push_address
  MODIFY COLUMN platform ENUM('fcm','apns','email','webhook','webpush') NOT NULL;

ALTER TABLE push_suppression
  MODIFY COLUMN platform ENUM('fcm','apns','email','webhook','webpush') NOT NULL;
