-- Named queries of the dashboard (store/ui_reads.py). Only what differs from
-- sqlite/ui.sql; the rest is in common/ui.sql. Pages read by keyset (created_at, id),
-- never by OFFSET and never with an exact COUNT over a large table.

-- name: ui_runs_page
-- One page of every kind of execution, newest first: each kind's newest rows before the
-- cursor (:before_at, :before_id) that pass the filters (a NULL filter passes all;
-- :needle is lower-case text found inside the searched columns joined by newlines: one
-- lower() per row, not an ILIKE per column, which is twice as slow), then the newest
-- :limit of them all. strpos, not LIKE: the planner takes a LIKE '%...%' over an
-- expression to match about one row, so it read and sorted the whole table; strpos() > 0
-- it takes to match many, so it walks the (created_at, id) index newest first and stops
-- at :limit matches (3 ms instead of 135 over 100,000 runs when 1 run in 97 matches;
-- when none matches it reads them all, as the scan did).
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
   WHERE CAST(:want_run AS INTEGER) = 1
     AND (created_at, id) < (CAST(:before_at AS DOUBLE PRECISION), CAST(:before_id AS TEXT))
     AND (CAST(:since AS DOUBLE PRECISION) IS NULL OR created_at >= CAST(:since AS DOUBLE PRECISION))
     AND (CAST(:status AS TEXT) IS NULL OR status = CAST(:status AS TEXT))
     AND (CAST(:provider AS TEXT) IS NULL OR provider = CAST(:provider AS TEXT))
     AND (CAST(:needle AS TEXT) IS NULL
          OR strpos(lower(concat_ws(chr(10), id, prompt, command_json, status_reason_code, status_reason_summary)), CAST(:needle AS TEXT)) > 0)
   ORDER BY created_at DESC, id DESC
   LIMIT :limit
) AS session_page
UNION ALL
SELECT * FROM (
  SELECT 'invocation' AS kind, id, status, status_reason_code AS reason_code,
         status_reason_summary AS reason_summary, CAST(NULL AS TEXT) AS provider, CAST(NULL AS TEXT) AS model, substr(prompt, 1, COALESCE(CAST(:prompt_chars AS INTEGER), 2147483647)) AS prompt, skill AS label, CAST(NULL AS TEXT) AS parent_id, CAST(NULL AS DOUBLE PRECISION) AS duration_s, input_tokens, output_tokens, cost_usd,
         created_at, ended_at, CAST(NULL AS TEXT) AS made_kind, CAST(NULL AS TEXT) AS made_id,
         CAST(NULL AS TEXT) AS command, kind AS origin,
         pruned_at, CAST(NULL AS TEXT) AS meta
    FROM invocations
   WHERE CAST(:want_invocation AS INTEGER) = 1
     AND (created_at, id) < (CAST(:before_at AS DOUBLE PRECISION), CAST(:before_id AS TEXT))
     AND (CAST(:since AS DOUBLE PRECISION) IS NULL OR created_at >= CAST(:since AS DOUBLE PRECISION))
     AND (CAST(:status AS TEXT) IS NULL OR status = CAST(:status AS TEXT))
     AND (CAST(:provider AS TEXT) IS NULL OR NULL = CAST(:provider AS TEXT))
     AND (CAST(:needle AS TEXT) IS NULL
          OR strpos(lower(concat_ws(chr(10), id, prompt, status_reason_code, status_reason_summary)), CAST(:needle AS TEXT)) > 0)
   ORDER BY created_at DESC, id DESC
   LIMIT :limit
) AS invocation_page
UNION ALL
SELECT * FROM (
  SELECT 'play' AS kind, id, status, status_reason_code AS reason_code,
         status_reason_summary AS reason_summary, CAST(NULL AS TEXT) AS provider, CAST(NULL AS TEXT) AS model, CAST(NULL AS TEXT) AS prompt, name AS label, show_id AS parent_id, CAST(NULL AS DOUBLE PRECISION) AS duration_s, CAST(NULL AS INTEGER) AS input_tokens, CAST(NULL AS INTEGER) AS output_tokens, CAST(NULL AS DOUBLE PRECISION) AS cost_usd,
         created_at, ended_at, CAST(NULL AS TEXT) AS made_kind, CAST(NULL AS TEXT) AS made_id,
         CAST(NULL AS TEXT) AS command, CAST(NULL AS TEXT) AS origin,
         CAST(NULL AS DOUBLE PRECISION) AS pruned_at, CAST(NULL AS TEXT) AS meta
    FROM plays
   WHERE CAST(:want_play AS INTEGER) = 1
     AND (created_at, id) < (CAST(:before_at AS DOUBLE PRECISION), CAST(:before_id AS TEXT))
     AND (CAST(:since AS DOUBLE PRECISION) IS NULL OR created_at >= CAST(:since AS DOUBLE PRECISION))
     AND (CAST(:status AS TEXT) IS NULL OR status = CAST(:status AS TEXT))
     AND (CAST(:provider AS TEXT) IS NULL OR NULL = CAST(:provider AS TEXT))
     AND (CAST(:needle AS TEXT) IS NULL
          OR strpos(lower(concat_ws(chr(10), id, status_reason_code, status_reason_summary)), CAST(:needle AS TEXT)) > 0)
   ORDER BY created_at DESC, id DESC
   LIMIT :limit
) AS play_page
UNION ALL
SELECT * FROM (
  SELECT 'schedule_run' AS kind, id, status, status_reason_code AS reason_code,
         status_reason_summary AS reason_summary, CAST(NULL AS TEXT) AS provider, CAST(NULL AS TEXT) AS model, CAST(NULL AS TEXT) AS prompt, (SELECT schedules.name FROM schedules WHERE schedules.id = schedule_runs.schedule_id) AS label, schedule_id AS parent_id, CAST(NULL AS DOUBLE PRECISION) AS duration_s, CAST(NULL AS INTEGER) AS input_tokens, CAST(NULL AS INTEGER) AS output_tokens, CAST(NULL AS DOUBLE PRECISION) AS cost_usd,
         created_at, ended_at, CASE WHEN session_id IS NOT NULL THEN 'run' WHEN invocation_id IS NOT NULL THEN 'invocation' WHEN show_id IS NOT NULL THEN 'show' END AS made_kind,
         COALESCE(session_id, invocation_id, show_id) AS made_id,
         CAST(NULL AS TEXT) AS command, action_kind AS origin,
         CAST(NULL AS DOUBLE PRECISION) AS pruned_at, CAST(NULL AS TEXT) AS meta
    FROM schedule_runs
   WHERE CAST(:want_schedule_run AS INTEGER) = 1
     AND (created_at, id) < (CAST(:before_at AS DOUBLE PRECISION), CAST(:before_id AS TEXT))
     AND (CAST(:since AS DOUBLE PRECISION) IS NULL OR created_at >= CAST(:since AS DOUBLE PRECISION))
     AND (CAST(:status AS TEXT) IS NULL OR status = CAST(:status AS TEXT))
     AND (CAST(:provider AS TEXT) IS NULL OR NULL = CAST(:provider AS TEXT))
     AND (CAST(:needle AS TEXT) IS NULL
          OR strpos(lower(concat_ws(chr(10), id, status_reason_code, status_reason_summary)), CAST(:needle AS TEXT)) > 0)
   ORDER BY created_at DESC, id DESC
   LIMIT :limit
) AS schedule_run_page
) AS page
ORDER BY created_at DESC, id DESC
LIMIT :limit
