-- Candidates of versions that decide into the decision column refuse a table
-- without it (ErrSchemaMismatch): stop them, or run older ones, before going
-- down. Dropping the column drops its CHECK constraint.
ALTER TABLE service_election DROP CONSTRAINT service_election_decision;
ALTER TABLE service_election DROP COLUMN decision;
