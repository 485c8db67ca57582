-- The lease of a row written without lease_ms (an operator's REPLACE or
-- INSERT) is the library's default, election.DefaultLeaseDuration (15 s),
-- instead of 20 s. Rows written by candidates always carry their own lease.
ALTER TABLE service_election ALTER COLUMN lease_ms SET DEFAULT 15000;
