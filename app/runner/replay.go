package runner

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"dovetail/assets"
	"dovetail/engine"
	"dovetail/engine/adapt"
)

// WorkItem is one request of a workload.
type WorkItem struct {
	Domain, Prompt string
}

// ReadWorkload reads a workload: one request per line, `domain<TAB>prompt`
// or just a prompt; blank lines and lines starting with # are skipped.
// "embedded:NAME" reads a workload shipped in assets/.
func ReadWorkload(path string) ([]WorkItem, error) {
	var data []byte
	var err error
	if name, ok := strings.CutPrefix(path, "embedded:"); ok {
		if data, err = assets.Workload(name); err != nil {
			return nil, err
		}
	} else if data, err = os.ReadFile(path); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	var items []WorkItem
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		it := WorkItem{Prompt: text}
		if d, p, ok := strings.Cut(text, "\t"); ok {
			it = WorkItem{Domain: strings.TrimSpace(d), Prompt: p}
		}
		if strings.TrimSpace(it.Prompt) == "" {
			return nil, fmt.Errorf("workload %s:%d: empty prompt", path, line)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("workload %s: %w", path, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("workload %s has no requests", path)
	}
	return items, nil
}

// Replay is a workload replayed through one DGF draft and adaptation
// mode: the configuration of `dovetail bench adapt`.
type Replay struct {
	Draft DraftChoice // auto, dgf:PATH or scratch
	Mode  adapt.Mode
	Items []WorkItem
	N     int     // tokens per request
	Temp  float32 // 0: greedy
	Seed  uint64  // of the first request, then +1 per request
	// Options are the runner's (threads, tree, planner, device and the
	// adaptation recipe); Draft and the adaptation mode come from above,
	// and nothing is saved or recalled.
	Options Options
}

// ReplayRow is one request's measurement.
type ReplayRow struct {
	Request      int
	Domain       string
	Tau          float64
	TokensPerSec float64
	Version      int     // the draft's weights' version after it
	RoundMs      float64 // decode time per round: what a trainer competing for the CPU slows
	// Predicted is the planner's tokens/s after the request (0: not
	// planned): what it expects of the next one, as `run --json` reports.
	Predicted float64
}

// ReplayResult is a replay's rows and what adaptation did.
type ReplayResult struct {
	Rows       []ReplayRow
	Adaptation adapt.Stats
	Adapted    bool // Adaptation is set
}

// RunReplay replays p on m, calling onRow after each request.
func RunReplay(ctx context.Context, m *Model, p Replay, onRow func(ReplayRow)) (ReplayResult, error) {
	if p.Draft.Kind == DraftScratch && p.Mode == adapt.Off {
		return ReplayResult{}, fmt.Errorf("a scratch draft without adaptation never learns anything")
	}
	o := p.Options
	o.Draft, o.Greedy, o.Slots = p.Draft, p.Temp <= 0, 1
	o.Adapt.Mode, o.Adapt.Save, o.Adapt.Recall = p.Mode, false, false
	r, err := New(m, o)
	if err != nil {
		return ReplayResult{}, err
	}
	defer r.Close()
	r.WaitDraft() // a workload measures the draft from its first request
	info := r.Draft()
	switch {
	case info.Name == "none", p.Draft.Kind == DraftAuto && info.Name == "dgf:untrained":
		return ReplayResult{}, fmt.Errorf("no saved or shipped draft for %s: use --draft dgf:PATH or scratch", m.Name)
	case !strings.HasPrefix(info.Name, "dgf:"):
		return ReplayResult{}, fmt.Errorf("replay drafts with a DGF draft, not %s", info.Name)
	}
	var res ReplayResult
	slot := r.Slot(0)
	for i, it := range p.Items {
		params := engine.SamplerParams{Temperature: p.Temp, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, Seed: p.Seed + uint64(i)}
		req := engine.Request{Prompt: m.Tok.Encode(it.Prompt, true, false), MaxTokens: p.N, Sampler: params, Stop: m.Tok.IsEOG}
		st, err := slot.Generate(ctx, req, func(int) error { return nil })
		if err != nil {
			return res, fmt.Errorf("request %d: %w", i+1, err)
		}
		row := ReplayRow{Request: i + 1, Domain: it.Domain, Tau: st.Tau(), TokensPerSec: st.GenTokensPerSec(), Version: st.DraftVersion}
		if st.Rounds > 0 {
			row.RoundMs = float64(st.GenTime.Microseconds()) / 1000 / float64(st.Rounds)
		}
		if pl := r.Planner(); pl != nil {
			row.Predicted = pl.PredictedTokensPerSec()
		}
		res.Rows = append(res.Rows, row)
		if onRow != nil {
			onRow(row)
		}
	}
	res.Adaptation, res.Adapted = r.Adaptation()
	return res, nil
}
