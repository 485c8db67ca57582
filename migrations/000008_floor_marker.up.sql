-- The term floor's marker (issue 31): the row of service_election_floor
-- whose anchor is '' (no election's name: names are 1 to 128 characters).
-- A candidate that finds no floor row for its election takes it for one
-- that never existed, and an insert then leads at once (acquired =
-- 'first', election/doc.go, "Terms"). A TRUNCATE of this table, a DELETE of
-- a floor row, or this table created (migration 6) just after a DELETE of
-- a row whose leader still runs, removes that evidence. So an insert is
-- 'first' only when the marker exists, its term_floor is the sum of
-- CRC32(anchor) over the other rows (the library adds each floor row it
-- creates, in the same transaction: a deleted floor row shows), and its
-- marked_at (microseconds, like terms) is at least the candidate's
-- LockDelay ago: a marker written just now gives a leader of a row just
-- deleted the time to stand down. A candidate that finds the marker
-- missing or wrong writes it again as this migration does. So for
-- LockDelay after this migration no insert is 'first'.
-- The column is added only when missing, and an existing marker is left
-- alone, so that running the migrations again changes nothing.
SET @sqlelect_ddl = IF(
  (SELECT COUNT(*) FROM information_schema.COLUMNS
   WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election_floor' AND COLUMN_NAME = 'marked_at') = 0,
  'ALTER TABLE service_election_floor ADD COLUMN marked_at BIGINT UNSIGNED NULL DEFAULT NULL',
  'DO 0'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
-- A floor row for every row, as migration 6 (rows an earlier version wrote
-- since have none).
INSERT INTO service_election_floor (anchor, term_floor)
SELECT anchor, term FROM service_election
ON DUPLICATE KEY UPDATE term_floor = GREATEST(term_floor, service_election.term);
SET @sqlelect_sum = (SELECT COALESCE(SUM(CRC32(anchor)), 0) FROM service_election_floor WHERE anchor <> '');
INSERT INTO service_election_floor (anchor, term_floor, marked_at)
VALUES ('', @sqlelect_sum, FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000))
ON DUPLICATE KEY UPDATE term_floor = term_floor;
