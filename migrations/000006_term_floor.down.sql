-- Candidates of versions that know the term floor refuse a database without
-- service_election_floor: stop them, or run older ones, before going down.
DROP TABLE IF EXISTS service_election_floor;
