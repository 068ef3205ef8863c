-- A version's lists changed: readers holding them reload them (in the transaction of the write).
INSERT INTO item_list_generations (version_id, generation)
VALUES (%(version)s, 1)
ON CONFLICT (version_id) DO UPDATE SET generation = item_list_generations.generation + 1
