DROP INDEX tickets_possible_duplicate_of;
DROP INDEX tickets_merged_into;
