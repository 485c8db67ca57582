-- Candidates from this version on write the history in the transaction
-- that assigns a term, and refuse a database without
-- service_election_history: stop them before going down.
DROP TABLE IF EXISTS service_election_history;
SET @sqlelect_ddl = IF(
  (SELECT COUNT(*) FROM information_schema.COLUMNS
   WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election_floor' AND COLUMN_NAME = 'terms') = 1,
  'ALTER TABLE service_election_floor DROP COLUMN terms',
  'DO 0'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
