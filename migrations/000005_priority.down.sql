-- Candidates of versions that know priority refuse a table without it
-- (ErrSchemaMismatch): stop them, or run older ones, before going down.
ALTER TABLE service_election DROP COLUMN priority;
