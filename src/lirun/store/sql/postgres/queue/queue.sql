-- The queue schema: where procrastinate's tables live beside lirun's, made once.
-- PostgreSQL only (SQLite has no queue), so this file sits apart from the per-dialect
-- query files and is loaded by store/queue_records.py alone. ``{schema}`` is an
-- identifier filled by psycopg.sql.Identifier and ``{stamp}`` a literal filled by
-- psycopg.sql.Literal (DDL takes no bound parameters); everything else is bound.

-- name: lock_queue_schema
-- Workers starting together wait here instead of racing to create the same objects.
SELECT pg_advisory_xact_lock(hashtext(:lock_key))

-- name: create_queue_schema
CREATE SCHEMA IF NOT EXISTS {schema}

-- name: queue_schema_state
-- Whether procrastinate's tables are there yet, and the stamp of the version that made them.
SELECT to_regclass(format('%I.procrastinate_jobs', :schema::text)) IS NOT NULL AS present,
       obj_description(to_regnamespace(:schema)::oid, 'pg_namespace') AS stamp

-- name: stamp_queue_schema
COMMENT ON SCHEMA {schema} IS {stamp}

-- name: lift_statement_timeout
-- Making the schema may wait for another maker's lock and run long DDL: no statement
-- timeout for this transaction.
SET LOCAL statement_timeout = 0
