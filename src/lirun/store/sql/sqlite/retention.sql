-- Named queries of `li gc` (store/retention_records.py, docs/retention.md). Only what
-- differs from postgres/retention.sql; the rest is in common/retention.sql. Ids arrive as
-- one JSON array per parameter.

-- name: gc_session_candidates
-- Ended (or stale) runs last touched before :cutoff and not yet pruned, in id order after
-- :after (one batch), with the facts the decision needs: the status of the flow the run
-- is a leg of, whether a play of an active show holds it, and the bytes pruning clears.
SELECT s.id, s.status, s.ended_at, s.updated_at, s.run_dir, s.artifacts_path, s.owner_host,
       i.status AS flow_status,
       (EXISTS (SELECT 1 FROM plays p JOIN shows w ON w.id = p.show_id
                WHERE w.status = 'active'
                  AND (p.session_id = s.id
                       OR p.id = CASE WHEN json_valid(s.metadata_json) THEN json_extract(s.metadata_json, '$.play_id') END))
       OR EXISTS (SELECT 1 FROM shows w WHERE w.status = 'active'
                   AND w.id =
                       CASE WHEN json_valid(s.metadata_json) THEN json_extract(s.metadata_json, '$.show_id') END)) AS in_active_show,
       COALESCE(LENGTH(CAST(s.prompt AS BLOB)), 0)
         + COALESCE(LENGTH(CAST(s.reply_text AS BLOB)), 0)
         + COALESCE(LENGTH(CAST(s.provider_error AS BLOB)), 0)
         + CASE WHEN s.provider = 'command' AND LENGTH(s.command_json) <= 2048 THEN 0
                ELSE COALESCE(LENGTH(CAST(s.command_json AS BLOB)), 0) END
         + COALESCE(LENGTH(CAST(s.provider_options_json AS BLOB)), 0)
         + COALESCE(LENGTH(CAST(s.artifact_contract_json AS BLOB)), 0)
         + COALESCE(LENGTH(CAST(s.artifact_verification_json AS BLOB)), 0)
         + COALESCE(LENGTH(CAST(s.status_evidence_refs AS BLOB)), 0)
         + (SELECT COALESCE(SUM(LENGTH(CAST(m.content AS BLOB))), 0) FROM messages m
             WHERE m.session_id = s.id) AS bulk_bytes
  FROM sessions s
  LEFT JOIN invocations i ON i.id = s.invocation_id
 WHERE s.pruned_at IS NULL AND s.id > :after
   AND COALESCE(s.ended_at, s.updated_at) < :cutoff
 ORDER BY s.id
 LIMIT :limit

-- name: gc_invocation_candidates
-- Ended (or stale) invocations last touched before :cutoff, not yet pruned, one batch.
SELECT i.id, i.status, i.ended_at, i.updated_at, i.run_dir, i.artifacts_path, i.owner_host,
       NULL AS flow_status, 0 AS in_active_show,
       COALESCE(LENGTH(CAST(i.prompt AS BLOB)), 0)
         + COALESCE(LENGTH(CAST(i.status_evidence_refs AS BLOB)), 0) AS bulk_bytes
  FROM invocations i
 WHERE i.pruned_at IS NULL AND i.id > :after
   AND COALESCE(i.ended_at, i.updated_at) < :cutoff
 ORDER BY i.id
 LIMIT :limit

-- name: gc_tombstone_sessions
-- The tombstone: bulky columns cleared, when and by whom. The guard is repeated here so a
-- run that a flow or an active show took up again since the batch was read is left whole.
-- A command run keeps its command (at most 2,048 characters of argv JSON): it is the
-- run's name in every list, a few bytes, not its bulk; an agent's argv may hold its prompt.
UPDATE sessions
   SET pruned_at = :now, pruned_by = :actor, prompt = NULL, reply_text = NULL,
       provider_error = NULL, provider_options_json = NULL,
       command_json = CASE WHEN provider = 'command' AND LENGTH(command_json) <= 2048
                           THEN command_json END,
       artifact_contract_json = NULL, artifact_verification_json = NULL,
       status_evidence_refs = NULL
 WHERE id IN (SELECT value FROM json_each(:ids)) AND pruned_at IS NULL
   AND status IN (SELECT value FROM json_each(:terminal))
   AND NOT EXISTS (SELECT 1 FROM invocations i
                    WHERE i.id = sessions.invocation_id
                      AND (i.status IS NULL
                           OR i.status NOT IN (SELECT value FROM json_each(:terminal))))
   AND NOT (EXISTS (SELECT 1 FROM plays p JOIN shows w ON w.id = p.show_id
                WHERE w.status = 'active'
                  AND (p.session_id = sessions.id
                       OR p.id = CASE WHEN json_valid(sessions.metadata_json) THEN json_extract(sessions.metadata_json, '$.play_id') END))
       OR EXISTS (SELECT 1 FROM shows w WHERE w.status = 'active'
                   AND w.id =
                       CASE WHEN json_valid(sessions.metadata_json) THEN json_extract(sessions.metadata_json, '$.show_id') END))
RETURNING id

-- name: gc_tombstone_invocations
UPDATE invocations
   SET pruned_at = :now, pruned_by = :actor, prompt = NULL, status_evidence_refs = NULL
 WHERE id IN (SELECT value FROM json_each(:ids)) AND pruned_at IS NULL
   AND status IN (SELECT value FROM json_each(:terminal))
RETURNING id

-- name: gc_delete_messages
-- A pruned run's transcript.
DELETE FROM messages WHERE session_id IN (SELECT value FROM json_each(:ids))

-- name: gc_clear_transition_evidence
-- The history keeps every status, reason and summary; only the evidence bulk goes.
UPDATE status_transitions SET evidence_refs = NULL
 WHERE entity_type = :entity_type AND entity_id IN (SELECT value FROM json_each(:ids))
   AND evidence_refs IS NOT NULL

-- name: gc_files_removed_sessions
UPDATE sessions SET files_removed_at = :now
 WHERE id IN (SELECT value FROM json_each(:ids)) AND files_removed_at IS NULL

-- name: gc_files_removed_invocations
UPDATE invocations SET files_removed_at = :now
 WHERE id IN (SELECT value FROM json_each(:ids)) AND files_removed_at IS NULL

-- name: gc_vacuum_unbounded
-- Nothing to do: SQLite has no statement timeout.
SELECT 1 AS done

-- name: gc_vacuum_bounded
-- Nothing to do.
SELECT 1 AS done

-- name: gc_vacuum
-- Give the space of the cleared columns back (li gc --vacuum); it runs outside a
-- transaction and takes the tables' locks while it copies them.
VACUUM

-- name: gc_wal_truncate
-- After VACUUM the rewritten pages sit in the WAL: checkpoint them into the file and
-- truncate the WAL, so the space is back on the file system.
PRAGMA wal_checkpoint(TRUNCATE)
