-- An expiry deleted lists: readers holding any version's lists reload them.
UPDATE item_list_generations SET generation = generation + 1
