-- The lease of a row written without lease_ms (an operator's REPLACE or
-- INSERT) is the library's default, election.DefaultLeaseDuration (15 s),
-- instead of 20 s. Rows written by candidates always carry their own lease.
-- Except during an adoption period ('sqlelect migrate adopt', package
-- schema's Adopt): while the recipe's nodes may still run, such a row's lease
-- must be the recipe's timeout (+ 1 s), which adopt made lease_ms's default
-- and marked with the column's comment ('sqlelect adoption …'); that default
-- stays until 'sqlelect migrate adopt-end'. The statement is chosen from
-- information_schema for that reason.
SET @sqlelect_ddl = (
  SELECT IF(COUNT(*) = 0, 'ALTER TABLE service_election ALTER COLUMN lease_ms SET DEFAULT 15000', 'DO 0')
  FROM information_schema.COLUMNS
  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND COLUMN_NAME = 'lease_ms'
    AND COLUMN_COMMENT LIKE 'sqlelect adoption%'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
