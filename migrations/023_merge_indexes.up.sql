-- A merge repoints the tickets that name the duplicate (merged into it, or
-- as its possible duplicate): without these it read every ticket.
CREATE INDEX tickets_merged_into ON tickets (merged_into) WHERE merged_into IS NOT NULL;
CREATE INDEX tickets_possible_duplicate_of ON tickets (possible_duplicate_of) WHERE possible_duplicate_of IS NOT NULL;
