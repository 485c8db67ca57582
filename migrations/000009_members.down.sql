-- Candidates run through members.Run refuse a database without
-- service_election_members: stop them before going down.
DROP TABLE IF EXISTS service_election_members;
