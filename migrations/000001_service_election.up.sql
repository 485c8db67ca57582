-- service_election: one row per election (the anchor), as in the MySQL-table
-- recipe this project is built on. Operators may REPLACE or DELETE rows with
-- plain SQL; see README.md ("Operating with plain SQL").
CREATE TABLE IF NOT EXISTS service_election (
  -- The election's name. Many elections share one table.
  anchor VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- The holder's identity (compared byte for byte, without padding, from
  -- migration 2 on).
  service_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- The holder's last renewal, by the database clock.
  last_seen_active TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  -- Fencing term: strictly increases every time the row changes hands. It is
  -- derived from the database clock in microseconds, and never lower than the
  -- previous term plus one while the row exists; after a DELETE or a plain
  -- REPLACE it is the clock alone (lower if the clock went back).
  term BIGINT UNSIGNED NOT NULL DEFAULT (FLOOR(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(6)) * 1000000)),
  -- When the current term began, by the database clock.
  term_started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  -- The lease the holder runs with, in milliseconds: the row is live while
  -- released = 0 AND last_seen_active + lease > NOW(6).
  lease_ms INT UNSIGNED NOT NULL DEFAULT 20000,
  -- 1 once the holder resigned cleanly: any candidate may take over at once.
  released TINYINT UNSIGNED NOT NULL DEFAULT 0,
  -- How the current term began: insert (a new row), expired, released,
  -- claimed (the row already named this candidate, e.g. after REPLACE), or
  -- operator (a REPLACE or INSERT that did not set it).
  acquired VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'operator',
  -- A small value the leader publishes (an address, say), like Consul's KV value.
  value VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  -- Which backend holds the row: table or lock.
  backend VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'table',
  -- The lock backend's holder connection id (CONNECTION_ID()); NULL for table.
  connection_id BIGINT UNSIGNED NULL DEFAULT NULL,
  PRIMARY KEY (anchor)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
