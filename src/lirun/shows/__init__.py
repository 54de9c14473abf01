"""Shows and plays: agents in their own git worktrees, merged only through a gate."""
