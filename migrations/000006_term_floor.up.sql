-- service_election_floor: per election, the highest term sqlelect issued
-- (election/doc.go, "Terms"). DELETE and REPLACE on service_election do not
-- touch it, so that:
--   - every term a candidate takes is above every term issued before, across
--     a DELETE, a REPLACE and a database clock set back;
--   - a name with no floor row never had an election: its first candidate
--     leads at once (acquired = 'first'), without the lock delay; after a
--     DELETE the next insert (acquired = 'insert') still waits it out.
-- A candidate assigns a term in one transaction with its floor row (SELECT …
-- FOR UPDATE, then raises it). Run this migration before upgrading the
-- candidates: candidates that know the floor refuse a database without it.
-- The table is created only when missing, and seeding raises a floor to the
-- row's term only, so that running the migrations again (golang-migrate's CLI
-- recording into another table) changes nothing.
CREATE TABLE IF NOT EXISTS service_election_floor (
  -- The election's name: service_election's anchor.
  anchor VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- The highest term issued for this election.
  term_floor BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (anchor)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- Every existing election has existed: its floor is its row's term.
INSERT INTO service_election_floor (anchor, term_floor)
SELECT anchor, term FROM service_election
ON DUPLICATE KEY UPDATE term_floor = GREATEST(term_floor, service_election.term);
