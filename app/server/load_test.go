package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"dovetail/app/server"
)

// outcome is what one load-test client saw.
type outcome int

const (
	completed    outcome = iota // 200, whole stream, [DONE]
	disconnected                // 200, then the client hung up on purpose
	refused                     // 429 with an OpenAI error body
)

// 100 clients stream at once against 2 slots and a queue of 16; every
// fifth hangs up after two chunks. Each must see a complete stream or a
// clean 429, the server's counters must agree with the clients, and once
// it has shut down no goroutine may be left.
func TestLoad(t *testing.T) {
	baseline := runtime.NumGoroutine()
	o := testOptions()
	o.Slots = 2
	ts := startWith(t, server.Config{Queue: 16}, tinyModel(t), o)
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	hc := &http.Client{Transport: tr}

	const clients = 100
	results := make([]outcome, clients)
	genTokens := make([]int, clients)
	var wg sync.WaitGroup
	startAt := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Two bursts of 50, 300 ms apart: each overflows 2 slots and a
			// queue of 16 however fast the machine decodes, and the queue
			// drains between them and fills again.
			time.Sleep(time.Duration(i/50)*300*time.Millisecond + time.Duration(i%50)*100*time.Microsecond)
			hangUp := i%5 == 0
			results[i], genTokens[i] = loadClient(t, hc, ts.URL, i, hangUp)
		}()
	}
	wg.Wait()
	elapsed := time.Since(startAt)

	var n [3]int
	sumGen := 0
	for i, r := range results {
		n[r]++
		if r == completed {
			sumGen += genTokens[i]
		}
	}
	t.Logf("%d completed, %d disconnected, %d refused in %v", n[completed], n[disconnected], n[refused], elapsed.Round(time.Millisecond))
	if n[completed] == 0 || n[refused] == 0 {
		t.Errorf("the load did not exercise both serving and refusing: %v", n)
	}
	if t.Failed() {
		return
	}

	// The server's view, once every handler has finished.
	eventually(t, 5*time.Second, "slots and queue empty", func() bool {
		return metric(t, ts.URL, "dovetail_requests_in_flight") == 0 && metric(t, ts.URL, "dovetail_queue_depth") == 0
	})
	ok := `dovetail_http_requests_total{endpoint="/v1/completions",status="200"}`
	busy := `dovetail_http_requests_total{endpoint="/v1/completions",status="429"}`
	eventually(t, 5*time.Second, "request counters settle", func() bool {
		return metric(t, ts.URL, ok)+metric(t, ts.URL, busy) == clients
	})
	if got := metric(t, ts.URL, ok); got != float64(n[completed]+n[disconnected]) {
		t.Errorf("metrics count %v answers 200, clients saw %d", got, n[completed]+n[disconnected])
	}
	if got := metric(t, ts.URL, busy); got != float64(n[refused]) {
		t.Errorf("metrics count %v answers 429, clients saw %d", got, n[refused])
	}
	// Disconnected clients' tokens were generated too, up to their limits.
	if gen := metric(t, ts.URL, "dovetail_generated_tokens_total"); gen < float64(sumGen) || gen > float64(sumGen+n[disconnected]*maxTokens(16)) {
		t.Errorf("generated tokens %v, completed streams had %d and %d more hung up", gen, sumGen, n[disconnected])
	}
	if c := metric(t, ts.URL, "dovetail_generation_tokens_per_second_count"); c < float64(n[completed]) {
		t.Errorf("tokens/s histogram has %v observations for %d completed requests", c, n[completed])
	}

	ts.stop()
	tr.CloseIdleConnections()
	eventually(t, 5*time.Second, fmt.Sprintf("goroutines back to %d", baseline), func() bool {
		return runtime.NumGoroutine() <= baseline
	})
}

// maxTokens varies the lengths, 16 to 32.
func maxTokens(i int) int { return 16 + i%17 }

// loadClient streams one completion and checks what it gets; it returns the
// outcome and, for a completed stream, the generated tokens by its usage.
func loadClient(t *testing.T, hc *http.Client, base string, i int, hangUp bool) (outcome, int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := fmt.Sprintf(`{"prompt":"Once upon a time, %d","max_tokens":%d,"stream":true,"stream_options":{"include_usage":true},"seed":%d}`, i, maxTokens(i), i)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Errorf("client %d: %v", i, err)
		return completed, 0
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		var e struct {
			Error struct {
				Code    string
				Message string
			}
		}
		b, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(b, &e) != nil || e.Error.Code != "rate_limit_exceeded" || e.Error.Message == "" {
			t.Errorf("client %d: 429 body %s", i, b)
		}
		return refused, 0
	case http.StatusOK:
	default:
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("client %d: status %d %s", i, resp.StatusCode, b)
		return completed, 0
	}
	if hangUp {
		buf := make([]byte, 1)
		events := 0
		for events < 2 {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
			if buf[0] == '\n' {
				events++ // one blank line per event: "data: …\n\n"
			}
		}
		cancel()
		return disconnected, 0
	}
	events := sseEvents(t, resp.Body)
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Errorf("client %d: stream did not end with [DONE]: %q", i, events)
		return completed, 0
	}
	finish, usage := "", 0
	for _, ev := range events[:len(events)-1] {
		var ch struct {
			Object  string
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(ev), &ch); err != nil || ch.Object != "text_completion" {
			t.Errorf("client %d: bad chunk %q", i, ev)
		}
		for _, c := range ch.Choices {
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage.CompletionTokens
		}
	}
	if finish != "length" && finish != "stop" {
		t.Errorf("client %d: finish_reason %q", i, finish)
	}
	if usage < 1 || usage > maxTokens(i) {
		t.Errorf("client %d: usage %d tokens, max %d", i, usage, maxTokens(i))
	}
	return completed, usage
}
