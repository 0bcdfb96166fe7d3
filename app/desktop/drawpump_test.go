package desktop

import (
	"sync/atomic"
	"testing"
	"time"

	"dovetail/engine"
)

// A streaming reply never waits on the UI: with a draw stuck on the UI's
// goroutine, a thousand rounds are handed over all the same, none of them
// draws on the generation's goroutine, the stuck draw was asked for once,
// and what it was handed is a copy that later rounds leave alone. The
// reply's end is drawn.
func TestDeliverNeverWaitsOnTheUI(t *testing.T) {
	a := started(t, Options{})
	c := a.chat
	c.conv.Messages = append(c.conv.Messages, Message{Role: "assistant"})
	v := c.addView(len(c.conv.Messages) - 1)
	stuck := make(chan struct{})
	var asked atomic.Int32
	pump := startDrawPump(func() { asked.Add(1); <-stuck })
	c.mu.Lock()
	c.lastDraw = time.Time{} // a frame is due at once
	c.mu.Unlock()

	handed := make(chan struct{})
	go func() { // as session.generate does, a round at a time
		var segs []Segment
		text := ""
		for range 1000 {
			segs, text = appendSegment(segs, "a ", engine.FromTarget), text+"a "
			c.deliver(v, pump, reply{segments: segs, text: text})
		}
		close(handed)
	}()
	select {
	case <-handed:
	case <-time.After(time.Minute):
		t.Fatal("the rounds waited on a draw that does not end")
	}
	c.mu.Lock()
	frames, drawn, pending := len(c.frames), c.drawn, c.pending
	c.mu.Unlock()
	if frames != 0 || drawn != nil || v.msg.Content != "" {
		t.Fatalf("the rounds drew on their own goroutine: %d frames, message %q", frames, v.msg.Content)
	}
	waitFor(t, "the pump's draw", func() bool { return asked.Load() > 0 })
	if n := asked.Load(); n != 1 {
		t.Errorf("the pump was asked for %d draws while one was under way, want 1", n)
	}
	if pending == nil || len(pending.segments) != 1 || pending.segments[0].Text != "a " {
		t.Errorf("the frame handed over changed with later rounds: %+v", pending)
	}
	close(stuck)

	c.deliver(v, pump, reply{done: true, text: "the end", segments: []Segment{{Text: "the end", Source: engine.FromTarget}}})
	waitFor(t, "the reply's end drawn", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.drawn != nil && c.drawn.done
	})
	if v.msg.Content != "the end" {
		t.Errorf("the reply's end shows %q", v.msg.Content)
	}
}
