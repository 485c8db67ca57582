-- priority: the holder's leadership preference (election.Config.Priority,
-- 0 to election.MaxPriority; 0 is no preference), written by the holder
-- when it takes the row and on its renewals. A live follower whose own
-- priority is higher asks the holder to hand over to it (it sets
-- transfer_to), once the holder has led for its tenure. A row written with
-- plain SQL (an operator's REPLACE) has 0 until its holder writes it.
ALTER TABLE service_election ADD COLUMN priority INT NOT NULL DEFAULT 0;
