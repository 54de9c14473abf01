-- Bulk import of finished executions (store/bulk_import.py): one statement per table for
-- a whole batch, the rows passed as one JSON array. Each row keeps the history rule: it
-- gets its creation transition (previous status NULL, source system). Every query here
-- differs from its namesake in postgres/bulk.sql.

-- name: bulk_insert_sessions
INSERT INTO sessions
    (id, status, status_reason_code, status_reason_summary, provider, model, prompt,
     started_at, ended_at, duration_s, input_tokens, output_tokens, cost_usd, exit_code,
     run_dir, artifacts_path, created_at, updated_at)
SELECT json_extract(value, '$.id'), json_extract(value, '$.status'),
       json_extract(value, '$.reason_code'), json_extract(value, '$.reason_summary'),
       json_extract(value, '$.provider'), json_extract(value, '$.model'),
       json_extract(value, '$.prompt'), json_extract(value, '$.created_at'),
       json_extract(value, '$.ended_at'), json_extract(value, '$.duration_s'),
       json_extract(value, '$.input_tokens'), json_extract(value, '$.output_tokens'),
       json_extract(value, '$.cost_usd'), json_extract(value, '$.exit_code'),
       json_extract(value, '$.run_dir'), json_extract(value, '$.artifacts_path'),
       json_extract(value, '$.created_at'), json_extract(value, '$.created_at')
  FROM json_each(:rows)

-- name: bulk_insert_session_transitions
-- :base is MAX(seq) read in the same write transaction.
INSERT INTO status_transitions
    (id, entity_type, entity_id, previous_status, status, reason_code, reason_summary,
     source, created_at, seq)
SELECT json_extract(value, '$.transition_id'), 'session', json_extract(value, '$.id'), NULL,
       json_extract(value, '$.status'), json_extract(value, '$.reason_code'), '',
       'system', json_extract(value, '$.created_at'), :base + key + 1
  FROM json_each(:rows)
