-- Named queries of the dashboard (store/ui_reads.py). Only what differs from
-- postgres/ui.sql; the rest is in common/ui.sql. Pages read by keyset (created_at, id),
-- never by OFFSET and never with an exact COUNT over a large table.

-- name: ui_runs_page
-- One page of every kind of execution, newest first: each kind's newest rows before the
-- cursor (:before_at, :before_id) that pass the filters (a NULL filter passes all; :q is
-- a LIKE pattern, which ignores ASCII case here), then the newest :limit of them all.
-- :want_<kind> is 1 or 0.
-- A schedule run names what it made (made_kind, made_id: its session, flow or show), so
-- its row links there, and is named by its schedule (label) and its action (origin); a
-- session brings its command (command: a command run's argv as JSON), an invocation its
-- origin (flow or manual), so the list can say what each is. A pruned run or flow says when
-- (pruned_at, migration 0010); a session brings its metadata (meta: what a show or
-- a team made it as: a gate, a play's attempt, a member). A prompt is cut to its first :prompt_chars characters
-- (NULL: whole), so a page of huge prompts costs a page, not their size. Otherwise only columns every version of these tables has are read.
SELECT * FROM (
SELECT * FROM (
  SELECT 'run' AS kind, id, status, status_reason_code AS reason_code,
         status_reason_summary AS reason_summary, provider, model,
         substr(prompt, 1, COALESCE(CAST(:prompt_chars AS INTEGER), 2147483647)) AS prompt,
         flow_leg AS label, invocation_id AS parent_id, duration_s, input_tokens,
         output_tokens, cost_usd,
         created_at, ended_at, CAST(NULL AS TEXT) AS made_kind, CAST(NULL AS TEXT) AS made_id,
         command_json AS command, CAST(NULL AS TEXT) AS origin,
         pruned_at, metadata_json AS meta
    FROM sessions
   WHERE :want_run = 1
     AND (created_at, id) < (:before_at, :before_id)
     AND (:since IS NULL OR created_at >= :since)
     AND (:status IS NULL OR status = :status)
     AND (:provider IS NULL OR provider = :provider)
     AND (:q IS NULL
          OR id LIKE :q ESCAPE '\'
          OR prompt LIKE :q ESCAPE '\'
          OR command_json LIKE :q ESCAPE '\'
          OR status_reason_code LIKE :q ESCAPE '\'
          OR status_reason_summary LIKE :q ESCAPE '\')
   ORDER BY created_at DESC, id DESC
   LIMIT :limit
) AS session_page
UNION ALL
SELECT * FROM (
  SELECT 'invocation' AS kind, id, status, status_reason_code AS reason_code,
         status_reason_summary AS reason_summary, CAST(NULL AS TEXT) AS provider, CAST(NULL AS TEXT) AS model, substr(prompt, 1, COALESCE(CAST(:prompt_chars AS INTEGER), 2147483647)) AS prompt, skill AS label, CAST(NULL AS TEXT) AS parent_id, CAST(NULL AS REAL) AS duration_s, input_tokens, output_tokens, cost_usd,
         created_at, ended_at, CAST(NULL AS TEXT) AS made_kind, CAST(NULL AS TEXT) AS made_id,
         CAST(NULL AS TEXT) AS command, kind AS origin,
         pruned_at, CAST(NULL AS TEXT) AS meta
    FROM invocations
   WHERE :want_invocation = 1
     AND (created_at, id) < (:before_at, :before_id)
     AND (:since IS NULL OR created_at >= :since)
     AND (:status IS NULL OR status = :status)
     AND (:provider IS NULL OR NULL = :provider)
     AND (:q IS NULL
          OR id LIKE :q ESCAPE '\'
          OR prompt LIKE :q ESCAPE '\'
          OR status_reason_code LIKE :q ESCAPE '\'
          OR status_reason_summary LIKE :q ESCAPE '\')
   ORDER BY created_at DESC, id DESC
   LIMIT :limit
) AS invocation_page
UNION ALL
SELECT * FROM (
  SELECT 'play' AS kind, id, status, status_reason_code AS reason_code,
         status_reason_summary AS reason_summary, CAST(NULL AS TEXT) AS provider, CAST(NULL AS TEXT) AS model, CAST(NULL AS TEXT) AS prompt, name AS label, show_id AS parent_id, CAST(NULL AS REAL) AS duration_s, CAST(NULL AS INTEGER) AS input_tokens, CAST(NULL AS INTEGER) AS output_tokens, CAST(NULL AS REAL) AS cost_usd,
         created_at, ended_at, CAST(NULL AS TEXT) AS made_kind, CAST(NULL AS TEXT) AS made_id,
         CAST(NULL AS TEXT) AS command, CAST(NULL AS TEXT) AS origin,
         CAST(NULL AS REAL) AS pruned_at, CAST(NULL AS TEXT) AS meta
    FROM plays
   WHERE :want_play = 1
     AND (created_at, id) < (:before_at, :before_id)
     AND (:since IS NULL OR created_at >= :since)
     AND (:status IS NULL OR status = :status)
     AND (:provider IS NULL OR NULL = :provider)
     AND (:q IS NULL
          OR id LIKE :q ESCAPE '\'
          OR lower(COALESCE(NULL, '')) LIKE :q ESCAPE '\'
          OR status_reason_code LIKE :q ESCAPE '\'
          OR status_reason_summary LIKE :q ESCAPE '\')
   ORDER BY created_at DESC, id DESC
   LIMIT :limit
) AS play_page
UNION ALL
SELECT * FROM (
  SELECT 'schedule_run' AS kind, id, status, status_reason_code AS reason_code,
         status_reason_summary AS reason_summary, CAST(NULL AS TEXT) AS provider, CAST(NULL AS TEXT) AS model, CAST(NULL AS TEXT) AS prompt, (SELECT schedules.name FROM schedules WHERE schedules.id = schedule_runs.schedule_id) AS label, schedule_id AS parent_id, CAST(NULL AS REAL) AS duration_s, CAST(NULL AS INTEGER) AS input_tokens, CAST(NULL AS INTEGER) AS output_tokens, CAST(NULL AS REAL) AS cost_usd,
         created_at, ended_at, CASE WHEN session_id IS NOT NULL THEN 'run' WHEN invocation_id IS NOT NULL THEN 'invocation' WHEN show_id IS NOT NULL THEN 'show' END AS made_kind,
         COALESCE(session_id, invocation_id, show_id) AS made_id,
         CAST(NULL AS TEXT) AS command, action_kind AS origin,
         CAST(NULL AS REAL) AS pruned_at, CAST(NULL AS TEXT) AS meta
    FROM schedule_runs
   WHERE :want_schedule_run = 1
     AND (created_at, id) < (:before_at, :before_id)
     AND (:since IS NULL OR created_at >= :since)
     AND (:status IS NULL OR status = :status)
     AND (:provider IS NULL OR NULL = :provider)
     AND (:q IS NULL
          OR id LIKE :q ESCAPE '\'
          OR lower(COALESCE(NULL, '')) LIKE :q ESCAPE '\'
          OR status_reason_code LIKE :q ESCAPE '\'
          OR status_reason_summary LIKE :q ESCAPE '\')
   ORDER BY created_at DESC, id DESC
   LIMIT :limit
) AS schedule_run_page
) AS page
ORDER BY created_at DESC, id DESC
LIMIT :limit
