-- priority: the holder's leadership preference (election.Config.Priority,
-- 0 to election.MaxPriority; 0 is no preference), written by the holder
-- when it takes the row and on its renewals. A live follower whose own
-- priority is higher asks the holder to hand over to it (it sets
-- transfer_to), once the holder has led for its tenure. A row written with
-- plain SQL (an operator's REPLACE) has 0 until its holder writes it.
-- The column is added only when missing, so that running the migrations
-- again (golang-migrate's CLI recording into another table) changes nothing
-- and leaves nothing dirty.
SET @sqlelect_ddl = IF(
  (SELECT COUNT(*) FROM information_schema.COLUMNS
   WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND COLUMN_NAME = 'priority') = 0,
  'ALTER TABLE service_election ADD COLUMN priority INT NOT NULL DEFAULT 0',
  'DO 0'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
