-- 0003: what an execution did, on its own row (not only in the raw stream files): the
-- prompt, the provider's options and CLI version, usage and cost as the provider reported
-- them (never estimated), the final reply, the child's own exit code beside li's mapped
-- one, and the provider's own error text and retry count.

ALTER TABLE sessions ADD COLUMN prompt TEXT;
ALTER TABLE sessions ADD COLUMN provider_options_json TEXT;
ALTER TABLE sessions ADD COLUMN provider_version TEXT;
ALTER TABLE sessions ADD COLUMN input_tokens INTEGER;
ALTER TABLE sessions ADD COLUMN output_tokens INTEGER;
ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER;
ALTER TABLE sessions ADD COLUMN cost_usd REAL;
ALTER TABLE sessions ADD COLUMN num_turns INTEGER;
ALTER TABLE sessions ADD COLUMN duration_s REAL;
ALTER TABLE sessions ADD COLUMN reply_text TEXT;
ALTER TABLE sessions ADD COLUMN child_exit_code INTEGER;
ALTER TABLE sessions ADD COLUMN provider_error TEXT;
ALTER TABLE sessions ADD COLUMN provider_retries INTEGER;
