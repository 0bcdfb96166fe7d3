package desktop

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"dovetail/app/runner/store"
)

// requestStat is one reply, for the speed and learning charts, kept
// across restarts (store.RepliesPath).
type requestStat struct {
	At           time.Time `json:"at"`
	Tau          float64   `json:"tau,omitempty"`
	TokensPerSec float64   `json:"tokens_per_s"`
	Rounds       int       `json:"rounds,omitempty"`
	// DraftVersion is the trainer's kept version when the reply ended:
	// the number the trainer, the saved drafts and the markers use.
	DraftVersion int `json:"draft_version,omitempty"`
}

// repliesKeep bounds the replies kept per model.
const repliesKeep = 500

// loadReplies reads a model's replies, oldest first (none: empty). Lines
// that do not parse are skipped; a file that cannot be read is an error
// the learning view shows.
func loadReplies(st *store.Store, fp string) ([]requestStat, error) {
	f, err := os.Open(st.RepliesPath(fp))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the speed history cannot be read (%v): it starts again", err)
	}
	defer f.Close()
	var out []requestStat
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r requestStat
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.TokensPerSec > 0 {
			out = append(out, r)
		}
	}
	return out, nil
}

// saveReplies writes a model's replies, the newest repliesKeep.
func saveReplies(st *store.Store, fp string, h []requestStat) error {
	h = h[max(0, len(h)-repliesKeep):]
	return st.WriteFile(st.RepliesPath(fp), false, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, r := range h {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	})
}
