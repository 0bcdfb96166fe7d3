package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"dovetail/assets"
)

// workItem is one request of a workload.
type workItem struct {
	Domain, Prompt string
}

// readWorkload reads a workload: one request per line, `domain<TAB>prompt`
// or just a prompt; blank lines and lines starting with # are skipped.
// "embedded:NAME" reads a workload shipped in assets/.
func readWorkload(path string) ([]workItem, error) {
	var data []byte
	var err error
	if name, ok := strings.CutPrefix(path, "embedded:"); ok {
		if data, err = assets.Workload(name); err != nil {
			return nil, err
		}
	} else if data, err = os.ReadFile(path); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	var items []workItem
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		it := workItem{Prompt: text}
		if d, p, ok := strings.Cut(text, "\t"); ok {
			it = workItem{Domain: strings.TrimSpace(d), Prompt: p}
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
