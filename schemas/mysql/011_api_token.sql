-- Operators' API tokens (docs/api.md "Operators and roles"), created,
-- listed and revoked by `heraldctl token create|list|revoke` and by the
-- admin API (/v1/tokens).  The token itself is never stored: only the hex
-- SHA-256 of it (a token is 256 random bits, so a plain hash is as hard
-- to invert as the token is to guess, and one lookup by hash finds it).
-- A row is never deleted: a revoked token keeps its name, so the audit
-- log (push_audit.actor 'token:<name>') never names two tokens alike.

CREATE TABLE IF NOT EXISTS push_api_token (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name        VARCHAR(64)   NOT NULL COMMENT 'unique and never reused',
  role        ENUM('viewer','operator','admin') NOT NULL,
  token_hash  CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
              COMMENT 'hex SHA-256 of the token',
  created_at  DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  created_by  VARCHAR(200)  NOT NULL COMMENT 'the audit actor that created it',
  expires_at  DATETIME(3)   NOT NULL,
  revoked_at  DATETIME(3)   NULL,
  revoked_by  VARCHAR(200)  NULL,
  PRIMARY KEY (id),
  UNIQUE KEY push_api_token_name (name),
  UNIQUE KEY push_api_token_hash (token_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
