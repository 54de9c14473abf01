-- Bulk import of finished executions (store/bulk_import.py): one statement per table for
-- a whole batch, the rows passed as one JSON array. Each row keeps the history rule: it
-- gets its creation transition (previous status NULL, source system). Every query here
-- differs from its namesake in sqlite/bulk.sql.

-- name: bulk_insert_sessions
INSERT INTO sessions
    (id, status, status_reason_code, status_reason_summary, provider, model, prompt,
     started_at, ended_at, duration_s, input_tokens, output_tokens, cost_usd, exit_code,
     run_dir, artifacts_path, created_at, updated_at)
SELECT r.id, r.status, r.reason_code, r.reason_summary, r.provider, r.model, r.prompt,
       r.created_at, r.ended_at, r.duration_s, r.input_tokens, r.output_tokens, r.cost_usd,
       r.exit_code, r.run_dir, r.artifacts_path, r.created_at, r.created_at
  FROM jsonb_to_recordset(CAST(:rows AS JSONB)) AS r(
       id TEXT, status TEXT, reason_code TEXT, reason_summary TEXT, provider TEXT,
       model TEXT, prompt TEXT, created_at DOUBLE PRECISION, ended_at DOUBLE PRECISION,
       duration_s DOUBLE PRECISION, input_tokens INTEGER, output_tokens INTEGER,
       cost_usd DOUBLE PRECISION, exit_code INTEGER, run_dir TEXT, artifacts_path TEXT)

-- name: bulk_insert_session_transitions
-- :base is unused here: the identity numbers the rows.
INSERT INTO status_transitions
    (id, entity_type, entity_id, previous_status, status, reason_code, reason_summary,
     source, created_at)
SELECT r.transition_id, 'session', r.id, NULL, r.status, r.reason_code, '', 'system',
       r.created_at
  FROM jsonb_to_recordset(CAST(:rows AS JSONB)) AS r(
       transition_id TEXT, id TEXT, status TEXT, reason_code TEXT,
       created_at DOUBLE PRECISION)
 WHERE CAST(:base AS BIGINT) IS NOT NULL
