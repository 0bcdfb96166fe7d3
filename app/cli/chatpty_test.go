package cli

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyChat is `dovetail chat` in a pseudo-terminal of a given width.
type ptyChat struct {
	t    *testing.T
	c    *exec.Cmd
	ptmx *os.File
	out  chan string
	seen string // all the output so far
}

func startChat(t *testing.T, cols int, args ...string) *ptyChat {
	t.Helper()
	c := command(append([]string{"chat"}, args...)...)
	ptmx, err := pty.StartWithSize(c, &pty.Winsize{Rows: 40, Cols: uint16(cols)})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	p := &ptyChat{t: t, c: c, ptmx: ptmx, out: make(chan string, 1024)}
	t.Cleanup(func() {
		ptmx.Close()
		if c.ProcessState == nil {
			c.Process.Kill()
			c.Wait()
		}
	})
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				b.Write(buf[:n])
				p.out <- b.String()
			}
			if err != nil {
				close(p.out)
				return
			}
		}
	}()
	return p
}

// expectN waits until the output holds what n times.
func (p *ptyChat) expectN(what string, n int) {
	p.t.Helper()
	deadline := time.After(60 * time.Second)
	for strings.Count(p.seen, what) < n {
		select {
		case s, ok := <-p.out:
			if !ok {
				p.t.Fatalf("the chat ended before %q:\n%q", what, p.seen)
			}
			p.seen = s
		case <-deadline:
			p.t.Fatalf("no %q in:\n%q", what, p.seen)
		}
	}
}

// expect waits for one more what.
func (p *ptyChat) expect(what string) { p.t.Helper(); p.expectN(what, strings.Count(p.seen, what)+1) }

func (p *ptyChat) send(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.ptmx, s); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for the chat to exit and for the last of its output.
func (p *ptyChat) wait() error {
	p.t.Helper()
	err := p.c.Wait()
	for s := range p.out {
		p.seen = s
	}
	return err
}
