-- The embeddings put to use: the tickets a draft drew on, a possible
-- duplicate named for agents, and merged tickets.
ALTER TABLE tickets ADD COLUMN draft_sources text[];                           -- the similar solved tickets the draft drew on
ALTER TABLE tickets ADD COLUMN possible_duplicate_of text REFERENCES tickets (id) ON DELETE SET NULL;
ALTER TABLE tickets ADD COLUMN merged_into text REFERENCES tickets (id);       -- set with status closed, by a merge
-- The similar tickets' index reads what changed since it last looked.
CREATE INDEX tickets_updated_at ON tickets (updated_at);
