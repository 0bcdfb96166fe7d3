package store

import "path/filepath"

// RepliesPath is the desktop app's record of a model's replies (speed, τ,
// draft version), which its speed and learning charts show across
// restarts.
func (s *Store) RepliesPath(fp string) string {
	return filepath.Join(s.cache, "history", fp+".replies.jsonl")
}
