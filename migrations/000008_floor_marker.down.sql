-- Candidates of versions that know the marker refuse a floor table without
-- marked_at (ErrSchemaMismatch): stop them, or run older ones, before going
-- down.
DELETE FROM service_election_floor WHERE anchor = '';
ALTER TABLE service_election_floor DROP COLUMN marked_at;
