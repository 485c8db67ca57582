-- decision: the heartbeat's scratch column. The heartbeat (election/doc.go,
-- "The algorithm") decides once, in its first assignment, into this column:
-- 'renewed', a take ('expired', 'claimed', 'released', 'transferred'), or
-- NULL for no change; its other assignments read that decision, and its
-- last sets the column back to NULL. Outside that statement it is always
-- NULL, which the CHECK constraint enforces (MySQL 8.0.16 and later, and
-- MariaDB, enforce CHECK): a value nobody decided can never be read as a
-- decision. Operators never write it; REPLACE and INSERT leave it NULL.
-- The column is added only when missing, so that running the migrations
-- again (golang-migrate's CLI recording into another table) changes nothing
-- and leaves nothing dirty.
SET @sqlelect_ddl = IF(
  (SELECT COUNT(*) FROM information_schema.COLUMNS
   WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND COLUMN_NAME = 'decision') = 0,
  'ALTER TABLE service_election ADD COLUMN decision ENUM(''renewed'', ''expired'', ''claimed'', ''released'', ''transferred'') CHARACTER SET ascii COLLATE ascii_bin NULL DEFAULT NULL, ADD CONSTRAINT service_election_decision CHECK (decision IS NULL)',
  'DO 0'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
