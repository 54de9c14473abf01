-- 0001: the initial lirun schema. Status is TEXT: vocabularies live in lifecycle.py.
-- An entity's status may be NULL only in rows imported from older stores; update_status
-- matches it with expected_statuses={None} (NULL-safe compare-and-set, design.md D5).

CREATE TABLE IF NOT EXISTS sessions (
    id                          TEXT PRIMARY KEY,
    run_id                      TEXT,
    progression_id              TEXT,
    first_msg_id                TEXT,
    last_msg_id                 TEXT,
    started_at                  DOUBLE PRECISION,
    ended_at                    DOUBLE PRECISION,
    invocation_id               TEXT,
    branch_id                   TEXT,
    resumed_from                TEXT,
    run_dir                     TEXT,
    artifacts_path              TEXT,
    artifact_contract_json      TEXT,
    artifact_verification_json  TEXT,
    exit_code                   INTEGER,
    engine_session_uid          TEXT,
    provider                    TEXT,
    model                       TEXT,
    command_json                TEXT,
    cwd                         TEXT,
    owner_pid                   INTEGER,
    owner_start_time            DOUBLE PRECISION,
    owner_host                  TEXT,
    owner_boot_id               TEXT,
    heartbeat_at                DOUBLE PRECISION,
    lease_seconds               DOUBLE PRECISION,
    metadata_json               TEXT,
    status                 TEXT,
    status_reason_code     TEXT,
    status_reason_summary  TEXT,
    status_evidence_refs   TEXT,
    created_at             DOUBLE PRECISION NOT NULL,
    updated_at             DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_status_idx ON sessions (status);
CREATE INDEX IF NOT EXISTS sessions_invocation_idx ON sessions (invocation_id, updated_at);
CREATE INDEX IF NOT EXISTS sessions_branch_idx ON sessions (branch_id, created_at);
CREATE INDEX IF NOT EXISTS sessions_run_idx ON sessions (run_id);
CREATE INDEX IF NOT EXISTS sessions_engine_idx ON sessions (engine_session_uid);
CREATE INDEX IF NOT EXISTS sessions_created_idx ON sessions (created_at);

CREATE TABLE IF NOT EXISTS invocations (
    id          TEXT PRIMARY KEY,
    skill       TEXT NOT NULL,
    prompt      TEXT,
    ended_at    DOUBLE PRECISION,
    exit_code   INTEGER,
    status                 TEXT,
    status_reason_code     TEXT,
    status_reason_summary  TEXT,
    status_evidence_refs   TEXT,
    created_at             DOUBLE PRECISION NOT NULL,
    updated_at             DOUBLE PRECISION NOT NULL
);

CREATE TABLE IF NOT EXISTS shows (
    id          TEXT PRIMARY KEY,
    topic       TEXT NOT NULL,
    ended_at    DOUBLE PRECISION,
    status                 TEXT,
    status_reason_code     TEXT,
    status_reason_summary  TEXT,
    status_evidence_refs   TEXT,
    created_at             DOUBLE PRECISION NOT NULL,
    updated_at             DOUBLE PRECISION NOT NULL
);

CREATE TABLE IF NOT EXISTS plays (
    id          TEXT PRIMARY KEY,
    show_id     TEXT NOT NULL,
    name        TEXT NOT NULL,
    session_id  TEXT,
    ended_at    DOUBLE PRECISION,
    status                 TEXT,
    status_reason_code     TEXT,
    status_reason_summary  TEXT,
    status_evidence_refs   TEXT,
    created_at             DOUBLE PRECISION NOT NULL,
    updated_at             DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS plays_show_idx ON plays (show_id);

CREATE TABLE IF NOT EXISTS teams (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    archived_at  DOUBLE PRECISION,
    status                 TEXT,
    status_reason_code     TEXT,
    status_reason_summary  TEXT,
    status_evidence_refs   TEXT,
    created_at             DOUBLE PRECISION NOT NULL,
    updated_at             DOUBLE PRECISION NOT NULL
);

CREATE TABLE IF NOT EXISTS schedules (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    spec         TEXT,
    action_kind  TEXT NOT NULL,
    action_json  TEXT,
    enabled      INTEGER NOT NULL DEFAULT 1,
    created_at   DOUBLE PRECISION NOT NULL,
    updated_at   DOUBLE PRECISION NOT NULL
);

CREATE TABLE IF NOT EXISTS schedule_runs (
    id             TEXT PRIMARY KEY,
    schedule_id    TEXT,
    invocation_id  TEXT,
    action_kind    TEXT NOT NULL,
    attempt        INTEGER NOT NULL DEFAULT 1,
    started_at     DOUBLE PRECISION,
    ended_at       DOUBLE PRECISION,
    exit_code      INTEGER,
    status                 TEXT,
    status_reason_code     TEXT,
    status_reason_summary  TEXT,
    status_evidence_refs   TEXT,
    created_at             DOUBLE PRECISION NOT NULL,
    updated_at             DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS schedule_runs_schedule_idx ON schedule_runs (schedule_id);

CREATE TABLE IF NOT EXISTS branches (
    id                  TEXT PRIMARY KEY,
    provider            TEXT,
    engine_session_uid  TEXT,
    first_session_id    TEXT,
    last_session_id     TEXT,
    created_at          DOUBLE PRECISION NOT NULL,
    updated_at          DOUBLE PRECISION NOT NULL
);

CREATE TABLE IF NOT EXISTS messages (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    role        TEXT NOT NULL,
    content     TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    UNIQUE (session_id, seq)
);

CREATE TABLE IF NOT EXISTS status_transitions (
    id               TEXT PRIMARY KEY,
    seq BIGSERIAL,
    entity_type      TEXT NOT NULL,
    entity_id        TEXT NOT NULL,
    previous_status  TEXT,
    status           TEXT NOT NULL,
    reason_code      TEXT NOT NULL,
    reason_summary   TEXT,
    evidence_refs    TEXT,
    source           TEXT NOT NULL,
    actor            TEXT,
    created_at       DOUBLE PRECISION NOT NULL,
    metadata         TEXT
);
CREATE INDEX IF NOT EXISTS status_transitions_entity_idx
    ON status_transitions (entity_type, entity_id, created_at);

CREATE TABLE IF NOT EXISTS admin_events (
    id              TEXT PRIMARY KEY,
    seq BIGSERIAL,
    event_type      TEXT NOT NULL,
    target_type     TEXT NOT NULL,
    target_id       TEXT NOT NULL,
    actor           TEXT,
    justification   TEXT,
    payload         TEXT,
    created_at      DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS admin_events_target_idx ON admin_events (target_id, created_at);
