package memload

import (
	"context"
	"testing"
	"time"
)

// A reader held to a rate reads about that much: between half and one and
// a half times rate × time (a generous bound: the point is that it waits,
// not how precisely).
func TestRunHoldsItsRate(t *testing.T) {
	const rate = 200e6
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	st, err := Run(ctx, 16<<20, rate, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Rate(); r < 0.5*rate || r > 1.5*rate {
		t.Fatalf("read %d bytes in %v: %.0f MB/s, asked for %.0f", st.Bytes, st.Elapsed, r/1e6, rate/1e6)
	}
}

func TestRunRefusesSmallBuffers(t *testing.T) {
	if _, err := Run(context.Background(), 1<<10, 0, nil); err == nil {
		t.Fatal("a 1 KiB buffer was accepted")
	}
}
