-- Back to utf8mb4_bin (PAD SPACE): trailing spaces are ignored again when
-- service_id is compared.
ALTER TABLE service_election MODIFY service_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
