-- 0002: the supervised child's identity, so a reaper can stop a process group that
-- outlived its dead owner (the child runs in its own session: its pid is the group id).

ALTER TABLE sessions ADD COLUMN child_pid INTEGER;
ALTER TABLE sessions ADD COLUMN child_start_time REAL;
