-- Named queries of `li gc` (store/retention_records.py, docs/retention.md). Only what
-- differs from sqlite/retention.sql; the rest is in common/retention.sql. Ids arrive as
-- one TEXT[] per parameter.

-- name: gc_session_candidates
-- Ended (or stale) runs last touched before :cutoff and not yet pruned, in id order after
-- :after (one batch), with the facts the decision needs: the status of the flow the run
-- is a leg of, whether a play of an active show holds it, and the bytes pruning clears.
SELECT s.id, s.status, s.ended_at, s.updated_at, s.run_dir, s.artifacts_path, s.owner_host,
       i.status AS flow_status,
       (EXISTS (SELECT 1 FROM plays p JOIN shows w ON w.id = p.show_id
                WHERE w.status = 'active'
                  AND (p.session_id = s.id
                       OR p.id = CAST(s.metadata_json AS JSONB) ->> 'play_id'))
       OR EXISTS (SELECT 1 FROM shows w WHERE w.status = 'active'
                   AND w.id = CAST(s.metadata_json AS JSONB) ->> 'show_id')) AS in_active_show,
       COALESCE(OCTET_LENGTH(s.prompt), 0)
         + COALESCE(OCTET_LENGTH(s.reply_text), 0)
         + COALESCE(OCTET_LENGTH(s.provider_error), 0)
         + CASE WHEN s.provider = 'command' AND LENGTH(s.command_json) <= 2048 THEN 0
                ELSE COALESCE(OCTET_LENGTH(s.command_json), 0) END
         + COALESCE(OCTET_LENGTH(s.provider_options_json), 0)
         + COALESCE(OCTET_LENGTH(s.artifact_contract_json), 0)
         + COALESCE(OCTET_LENGTH(s.artifact_verification_json), 0)
         + COALESCE(OCTET_LENGTH(s.status_evidence_refs), 0)
         + (SELECT COALESCE(SUM(OCTET_LENGTH(m.content)), 0) FROM messages m
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
       NULL AS flow_status, FALSE AS in_active_show,
       COALESCE(OCTET_LENGTH(i.prompt), 0)
         + COALESCE(OCTET_LENGTH(i.status_evidence_refs), 0) AS bulk_bytes
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
 WHERE id = ANY(CAST(:ids AS TEXT[])) AND pruned_at IS NULL
   AND status = ANY(CAST(:terminal AS TEXT[]))
   AND NOT EXISTS (SELECT 1 FROM invocations i
                    WHERE i.id = sessions.invocation_id
                      AND (i.status IS NULL
                           OR NOT (i.status = ANY(CAST(:terminal AS TEXT[])))))
   AND NOT (EXISTS (SELECT 1 FROM plays p JOIN shows w ON w.id = p.show_id
                WHERE w.status = 'active'
                  AND (p.session_id = sessions.id
                       OR p.id = CAST(sessions.metadata_json AS JSONB) ->> 'play_id'))
       OR EXISTS (SELECT 1 FROM shows w WHERE w.status = 'active'
                   AND w.id = CAST(sessions.metadata_json AS JSONB) ->> 'show_id'))
RETURNING id

-- name: gc_tombstone_invocations
UPDATE invocations
   SET pruned_at = :now, pruned_by = :actor, prompt = NULL, status_evidence_refs = NULL
 WHERE id = ANY(CAST(:ids AS TEXT[])) AND pruned_at IS NULL
   AND status = ANY(CAST(:terminal AS TEXT[]))
RETURNING id

-- name: gc_delete_messages
-- A pruned run's transcript.
DELETE FROM messages WHERE session_id = ANY(CAST(:ids AS TEXT[]))

-- name: gc_clear_transition_evidence
-- The history keeps every status, reason and summary; only the evidence bulk goes.
UPDATE status_transitions SET evidence_refs = NULL
 WHERE entity_type = :entity_type AND entity_id = ANY(CAST(:ids AS TEXT[]))
   AND evidence_refs IS NOT NULL

-- name: gc_files_removed_sessions
UPDATE sessions SET files_removed_at = :now
 WHERE id = ANY(CAST(:ids AS TEXT[])) AND files_removed_at IS NULL

-- name: gc_files_removed_invocations
UPDATE invocations SET files_removed_at = :now
 WHERE id = ANY(CAST(:ids AS TEXT[])) AND files_removed_at IS NULL

-- name: gc_vacuum_unbounded
-- VACUUM may run longer than lirun's statement timeout: lifted for this session only.
SELECT set_config('statement_timeout', '0', false) AS done

-- name: gc_vacuum_bounded
-- Back to the session's own statement timeout (the one it was opened with).
RESET statement_timeout

-- name: gc_vacuum
-- Give the space of the cleared columns back (li gc --vacuum); it runs outside a
-- transaction and takes the tables' locks while it copies them.
VACUUM sessions, invocations, messages, status_transitions

-- name: gc_wal_truncate
-- Nothing to do: the server manages its own write-ahead log.
SELECT 1 AS done
