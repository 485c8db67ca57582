-- transfer_to: a planned change of leader (election.Election.Transfer,
-- election.RequestTransfer and election.StepDown, or plain SQL):
--   NULL        nothing planned (the usual state);
--   on a live row (released = 0): a request to the leader, acted on at its
--   next renewal: 'id' hands leadership to candidate id, '' (the empty
--   string) steps the leader down for anyone to take over;
--   on a released row: the leader handed the row to this candidate, and only
--   it may take it until the row's lease (a short window) runs out.
-- UPDATE service_election SET transfer_to = 'node-2' WHERE anchor = 'jobs';
-- The column has service_id's character set and collation (which migration 2
-- changes on servers that have a NO PAD binary one), so that the two compare
-- alike; the statement is built from information_schema for that reason.
-- The column is added only when missing, so that running the migrations
-- again (golang-migrate's CLI recording into another table) changes nothing
-- and leaves nothing dirty.
SET @sqlelect_transfer_collation = (
  SELECT COALESCE(MIN(COLLATION_NAME), 'utf8mb4_bin') FROM information_schema.COLUMNS
  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND COLUMN_NAME = 'service_id'
);
SET @sqlelect_ddl = IF(
  (SELECT COUNT(*) FROM information_schema.COLUMNS
   WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND COLUMN_NAME = 'transfer_to') = 0,
  CONCAT(
    'ALTER TABLE service_election ADD COLUMN transfer_to VARCHAR(255) CHARACTER SET utf8mb4 COLLATE ',
    @sqlelect_transfer_collation,
    ' NULL DEFAULT NULL'
  ),
  'DO 0'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
