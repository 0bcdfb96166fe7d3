// Package store keeps the files Dovetail keeps for its user: the drafts
// of each target (distilled or adapted online) with their text memories,
// the planner's profiles, settings and conversations, with their paths in
// one place. What holds the user's text is private to the user: files
// 0600 in directories 0700.
package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"dovetail/internal/atomicfile"
)

// Store is where the files live: three roots, as the platform separates
// configuration (kept), cache (can be deleted) and data (the user's).
type Store struct {
	config, cache, data string
}

// Open is the user's store: <user config dir>/dovetail (drafts, their
// memories, settings), <user cache dir>/dovetail (profiles) and <user data
// dir>/dovetail (conversations; $XDG_DATA_HOME or ~/.local/share on Linux).
func Open() (*Store, error) {
	config, err := os.UserConfigDir()
	if err != nil {
		return nil, fmt.Errorf("no user config directory: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("no user cache directory: %w", err)
	}
	data, err := userDataDir(config)
	if err != nil {
		return nil, err
	}
	return &Store{config: filepath.Join(config, "dovetail"), cache: filepath.Join(cache, "dovetail"),
		data: filepath.Join(data, "dovetail")}, nil
}

// At is a store with all three roots under dir (portable installs, tests).
func At(dir string) *Store {
	return &Store{config: filepath.Join(dir, "config"), cache: filepath.Join(dir, "cache"), data: filepath.Join(dir, "data")}
}

// userDataDir follows the XDG base directories on Unix; elsewhere the
// config directory is also the data directory (AppData, Application
// Support).
func userDataDir(config string) (string, error) {
	if runtime.GOOS == "windows" || runtime.GOOS == "darwin" {
		return config, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no user data directory: %w", err)
	}
	return filepath.Join(home, ".local", "share"), nil
}

// ModelsDir is the models folder `dovetail pull` fills (the pull
// package's Dir, when $DOVETAIL_MODELS does not name another).
func (s *Store) ModelsDir() string { return filepath.Join(s.data, "models") }

// DraftsDir holds each target's draft and text memory, named by the
// target's fingerprint.
func (s *Store) DraftsDir() string { return filepath.Join(s.config, "drafts") }

// DraftPath is where the draft of the target with fingerprint fp is kept
// (`--draft auto` finds it there).
func (s *Store) DraftPath(fp string) string { return filepath.Join(s.DraftsDir(), fp+".gguf") }

// MemoryPath is where the text memory of the target with fingerprint fp is
// kept, beside its draft.
func (s *Store) MemoryPath(fp string) string { return filepath.Join(s.DraftsDir(), fp+".memory") }

// PrevPath is where the draft an install replaced is kept, restorable.
func (s *Store) PrevPath(fp string) string { return s.DraftPath(fp) + ".prev" }

// ProfilePath is the planner's profile of one machine, build and model.
func (s *Store) ProfilePath(key string) string {
	return filepath.Join(s.cache, "profiles", key+".json")
}

// HistoryPath is a model's record of predicted and measured speeds.
func (s *Store) HistoryPath(fp string) string {
	return filepath.Join(s.cache, "history", fp+".jsonl")
}

// SettingsPath is the settings file that run, serve and the desktop app
// read their defaults from.
func (s *Store) SettingsPath() string { return filepath.Join(s.config, "settings.json") }

// AppSettingsPath is the desktop app's own settings (the API server,
// presets, views).
func (s *Store) AppSettingsPath() string { return filepath.Join(s.config, "desktop.json") }

// ConversationsDir holds the desktop app's conversations.
func (s *Store) ConversationsDir() string { return filepath.Join(s.data, "conversations") }

// Private says what a file holds: the user's text (0600 in a 0700
// directory) or not (0644).
type Private bool

// WriteFile writes path atomically through write, making its directory
// first. A private file's directory is made (or made again) 0700.
func (s *Store) WriteFile(path string, private Private, write func(io.Writer) error) error {
	if err := s.MakeDir(filepath.Dir(path), private); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if private {
		mode = 0o600
	}
	return atomicfile.WriteMode(path, mode, write)
}

// MakeDir makes dir (and its parents); a private one is 0700, and an
// existing one is made 0700.
func (s *Store) MakeDir(dir string, private Private) error {
	mode := os.FileMode(0o755)
	if private {
		mode = 0o700
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	if private {
		if st, err := os.Stat(dir); err == nil && st.Mode().Perm() != 0o700 {
			return os.Chmod(dir, 0o700)
		}
	}
	return nil
}

// SetAside renames a file that does not load to path.corrupt, so that the
// next write neither fails on it nor destroys what a user may recover;
// where an earlier one is kept there, to path.corrupt.2, .3 and on: none
// is overwritten. It returns the new path ("" when there was no file).
func (s *Store) SetAside(path string) (string, error) {
	for i := 1; i <= maxAside; i++ {
		aside := AsidePath(path, i)
		if _, err := os.Lstat(aside); err == nil {
			continue
		}
		err := os.Rename(path, aside)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return "", nil
		case err != nil:
			return "", fmt.Errorf("%s does not load and cannot be moved aside: %w", path, err)
		}
		return aside, nil
	}
	return "", fmt.Errorf("%s does not load, and %d files are set aside beside it already: remove them", path, maxAside)
}

// maxAside bounds the files set aside for one path.
const maxAside = 100

// AsidePath is where SetAside moves path the i-th time (from 1).
func AsidePath(path string, i int) string {
	if i == 1 {
		return path + ".corrupt"
	}
	return path + ".corrupt." + strconv.Itoa(i)
}
