DROP TABLE IF EXISTS service_election;
