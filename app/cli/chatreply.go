package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"dovetail/app/runner"
	"dovetail/models/chat"
)

// errStopped ends a generation Ctrl-C stopped.
var errStopped = errors.New("stopped")

// replyOut is a reply's way to the screen: once Ctrl-C stopped it, no
// text passes, so nothing follows the ^C.
type replyOut struct {
	mu      sync.Mutex
	w       io.StringWriter // the reply's text (wrapped or not)
	echo    io.Writer       // where ^C goes
	cancel  func()
	stopped bool
	shown   strings.Builder // the text the user saw
}

func (o *replyOut) text(s string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return errStopped
	}
	o.shown.WriteString(s)
	_, err := o.w.WriteString(s)
	return err
}

// stop stops the reply, writing ^C where the terminal does not (it
// echoes it where Ctrl-C is a signal).
func (o *replyOut) stop(echo bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	o.stopped = true
	o.cancel()
	if echo {
		io.WriteString(o.echo, "^C")
	}
}

// reply sends text and streams the model's answer; Ctrl-C stops it, and
// the conversation keeps what was shown of it.
func (s *chatSession) reply(text string) error {
	s.history = append(s.history, chat.Message{Role: "user", Content: text})
	prompt, err := s.fit()
	if err != nil {
		s.history = s.history[:len(s.history)-1]
		fmt.Fprintf(s.out, "%v\n", err)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &replyOut{w: s.replyWriter(), echo: s.out, cancel: cancel}
	unwatch := s.in.watch(func() { out.stop(true) })
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-sig:
			out.stop(false)
		case <-s.quit:
			out.stop(false)
		case <-ctx.Done():
		}
	}()
	req := runner.TextRequest{Prompt: prompt, OnText: func(p runner.Piece) error { return out.text(p.Text) }}
	req.Sampler, req.Stops, req.MaxTokens = withModelParams(s.params, s.set.params, s.set.maxTokens(), s.setsParam)
	res, err := s.r.Slot(0).GenerateText(ctx, req)
	unwatch()
	out.mu.Lock()
	stopped, shown := out.stopped, out.shown.String()
	out.mu.Unlock()
	fmt.Fprintln(s.out)
	if err != nil && !stopped {
		return err
	}
	s.history = append(s.history, chat.Message{Role: "assistant", Content: shown})
	st := res.Stats
	tau := "-"
	if st.Rounds > 0 {
		tau = fmt.Sprintf("%.2f", st.Tau())
	}
	end := ""
	if stopped {
		end = ", stopped"
	}
	fmt.Fprintf(s.out, "[%d tokens, %.1f tokens/s, τ %s%s]\n", st.GenTokens, st.GenTokensPerSec(), tau, end)
	return nil
}

// replyWriter is where a reply's text goes: wrapped between words at the
// terminal's width unless /set nowordwrap. The last column stays empty:
// a terminal's cursor waits there for the next character, and taking a
// word back from there would miss it by one.
func (s *chatSession) replyWriter() io.StringWriter {
	if w := s.in.width(); s.set.wrap && w > 1 {
		return newWrapper(s.out, w-1)
	}
	return stringWriter{s.out}
}

type stringWriter struct{ io.Writer }

func (w stringWriter) WriteString(s string) (int, error) { return io.WriteString(w.Writer, s) }
