-- Back to migration 1's default, 20 s, except during an adoption period
-- (see the up migration), which keeps the adopted default.
SET @sqlelect_ddl = (
  SELECT IF(COUNT(*) = 0, 'ALTER TABLE service_election ALTER COLUMN lease_ms SET DEFAULT 20000', 'DO 0')
  FROM information_schema.COLUMNS
  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND COLUMN_NAME = 'lease_ms'
    AND COLUMN_COMMENT LIKE 'sqlelect adoption%'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
