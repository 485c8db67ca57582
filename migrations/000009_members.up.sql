-- The members of each election (issue 35, package members): every candidate
-- run through members.Run (the CLI's campaign and run) registers here, so
-- that operators can list who runs, and a second candidate started with an
-- ID that a live member has is refused. No election statement reads this
-- table: the election protocol is unchanged.
CREATE TABLE IF NOT EXISTS service_election_members (
  -- The election's name: service_election's anchor.
  anchor VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- The candidate's ID (its service_id when it leads).
  member_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- New for each Run: tells two processes with one ID apart.
  incarnation CHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- The member's version (members.Options.Version) and where it runs.
  version VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  host VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  -- Its process ID on host: a restart after a crash replaces a row whose
  -- process no longer runs on this host without waiting out its lease.
  pid INT UNSIGNED NOT NULL DEFAULT 0,
  -- Its Config.Preference.Priority, and its latest health check result.
  priority INT NOT NULL DEFAULT 0,
  healthy TINYINT UNSIGNED NOT NULL DEFAULT 1,
  -- When it registered and when it last refreshed its row, by the database
  -- clock in microseconds (as terms are): it is live while
  -- last_seen + lease_ms * 1000 is ahead of the clock.
  started_at BIGINT UNSIGNED NOT NULL,
  last_seen BIGINT UNSIGNED NOT NULL,
  lease_ms INT UNSIGNED NOT NULL,
  PRIMARY KEY (anchor, member_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
