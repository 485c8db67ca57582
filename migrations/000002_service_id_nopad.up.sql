-- service_id compares byte for byte, trailing spaces included. utf8mb4_bin is
-- a PAD SPACE collation on MariaDB and MySQL alike ('n1' = 'n1 '), so two
-- candidates whose IDs differ only by trailing spaces would both match the
-- row. This switches the column to a NO PAD binary collation:
-- utf8mb4_nopad_bin on MariaDB (10.2 and later), utf8mb4_0900_bin on MySQL
-- (8.0.17 and later; MariaDB 11.8 has both names, and gets nopad_bin).
-- Neither name exists on both servers, so the statement
-- is chosen from information_schema and run as a prepared statement; the
-- column stays VARCHAR(255) utf8mb4 (readable in any client).
SET @sqlelect_nopad_bin = (
  SELECT COLLATION_NAME FROM information_schema.COLLATIONS
  WHERE COLLATION_NAME IN ('utf8mb4_nopad_bin', 'utf8mb4_0900_bin')
  ORDER BY COLLATION_NAME = 'utf8mb4_nopad_bin' DESC LIMIT 1
);
SET @sqlelect_ddl = CONCAT(
  'ALTER TABLE service_election MODIFY service_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE ',
  COALESCE(@sqlelect_nopad_bin, 'no_NO_PAD_binary_utf8mb4_collation_on_this_server'),
  ' NOT NULL'
);
PREPARE sqlelect_stmt FROM @sqlelect_ddl;
EXECUTE sqlelect_stmt;
DEALLOCATE PREPARE sqlelect_stmt;
