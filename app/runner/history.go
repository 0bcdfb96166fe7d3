package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"

	"dovetail/app/runner/store"
	"dovetail/engine"
)

// Record is one runner's life: the decode speed setup predicted for its
// settings, the one its planner predicted at the end, and the one
// measured over its generations.
type Record struct {
	At        time.Time `json:"at"`
	Predicted float64   `json:"predicted_tokens_per_s,omitempty"`
	Planned   float64   `json:"planned_tokens_per_s,omitempty"`
	Measured  float64   `json:"measured_tokens_per_s"`
	Tokens    int       `json:"tokens"`
	Draft     string    `json:"draft"`
	Threads   int       `json:"threads"`
}

// minRecordTokens is the fewest generated tokens a record is kept for: a
// few tokens' speed says little.
const minRecordTokens = 16

// historyKeep bounds the records kept per model.
const historyKeep = 100

// tally adds a generation to what the runner measured.
func (r *Runner) tally(st engine.Stats) {
	r.mu.Lock()
	r.genTokens += st.GenTokens
	r.genTime += st.GenTime
	r.mu.Unlock()
}

// record appends what this runner measured to the model's history.
func (r *Runner) record() error {
	r.mu.Lock()
	tokens, d := r.genTokens, r.genTime
	r.mu.Unlock()
	if r.store == nil || tokens < minRecordTokens || d <= 0 {
		return nil
	}
	rec := Record{At: time.Now().UTC(), Predicted: r.opts.Predicted, Measured: float64(tokens) / d.Seconds(), Tokens: tokens,
		Draft: r.draft.info.Name, Threads: r.per}
	if r.plan != nil {
		rec.Planned = r.plan.PredictedTokensPerSec()
	}
	return AppendRecord(r.store, r.model.Fingerprint, rec)
}

// AppendRecord adds rec to a model's history, keeping the newest
// historyKeep records.
func AppendRecord(st *store.Store, fp string, rec Record) error {
	h, _ := History(st, fp)
	h = append(h, rec)
	h = h[max(0, len(h)-historyKeep):]
	return st.WriteFile(st.HistoryPath(fp), false, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, r := range h {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// History is a model's records, oldest first (none: empty). Lines that do
// not parse are skipped.
func History(st *store.Store, fp string) ([]Record, error) {
	f, err := os.Open(st.HistoryPath(fp))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Record
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Measured > 0 {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}

// Drift is the median of measured over predicted speed in the newest ten
// records that carry a prediction (setup's, else the planner's), and how
// many there were: 1 is a prediction that holds.
func Drift(h []Record) (ratio float64, n int) {
	var rs []float64
	for i := len(h) - 1; i >= 0 && len(rs) < 10; i-- {
		p := h[i].Predicted
		if p <= 0 {
			p = h[i].Planned
		}
		if p > 0 {
			rs = append(rs, h[i].Measured/p)
		}
	}
	if len(rs) == 0 {
		return 0, 0
	}
	slices.Sort(rs)
	return stat.Quantile(0.5, stat.Empirical, rs, nil), len(rs)
}

// MaxDrift is how far measured speed may drift from the prediction before
// setup calibrates a model again.
const MaxDrift = 0.25
