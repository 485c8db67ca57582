-- The history of each election (issue 35, package history): one row per
-- term sqlelect assigned, written in the transaction that raises the term
-- floor (internal/floor), so that a term is in the history exactly when it
-- was issued. Each election keeps its last 1,000 terms: the floor row counts
-- the terms it raised the floor to (terms), and a term is written in slot
-- terms MOD 1000, over the oldest. Candidates read nothing here: the
-- election protocol is unchanged (model/README.md).
SET @sqlelect_ddl = IF(
  (SELECT COUNT(*) FROM information_schema.COLUMNS
   WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election_floor' AND COLUMN_NAME = 'terms') = 0,
  'ALTER TABLE service_election_floor ADD COLUMN terms BIGINT UNSIGNED NOT NULL DEFAULT 0',
  'DO 0'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
CREATE TABLE IF NOT EXISTS service_election_history (
  -- The election's name: service_election's anchor.
  anchor VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- Where the term is kept: the floor's terms MOD 1000 when it was issued.
  slot SMALLINT UNSIGNED NOT NULL,
  -- The term, and the candidate it was assigned to (service_id).
  term BIGINT UNSIGNED NOT NULL,
  holder VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- How it began: the row's acquired (first, insert, expired, released,
  -- transferred, claimed, lock, operator).
  began VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- When it began, by the database clock in microseconds (as terms are).
  started_at BIGINT UNSIGNED NOT NULL,
  -- When and why it ended, once known: written by a holder that resigned
  -- (resigned, transferred), else by the next term's holder as it saw the
  -- row (expired, resigned, transferred, deleted, replaced, claimed, lost),
  -- at that term's start. NULL while it runs, or when nobody knows.
  ended_at BIGINT UNSIGNED NULL DEFAULT NULL,
  ended VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL DEFAULT NULL,
  PRIMARY KEY (anchor, slot),
  -- The terms still open, which a new term ends: one, usually.
  KEY open_terms (anchor, ended_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
