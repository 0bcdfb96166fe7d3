package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// errInterruptedLine is Ctrl-C at the prompt: the line is dropped.
var errInterruptedLine = errors.New("interrupted")

// lineReader reads the user's lines: with editing and history on a
// terminal, plainly from a pipe.
type lineReader interface {
	// readLine reads a line; Ctrl-C gives the line it dropped and
	// errInterruptedLine, Ctrl-D on an empty line (or the end of a pipe)
	// io.EOF.
	readLine(prompt string) (string, error)
	writer() io.Writer
	// width is the terminal's width in columns (0: not a terminal).
	width() int
	// watch calls interrupt on Ctrl-C until stop; keys typed meanwhile
	// wait for the next prompt.
	watch(interrupt func()) (stop func())
	// hangup ends the reading at once: readLine answers io.EOF from
	// then on (SIGTERM, SIGHUP: the chat ends as at Ctrl-D).
	hangup()
	// leave puts the terminal back as it was, first ending the prompt's
	// line after Ctrl-D.
	leave(eof bool)
}

// newLineReader reads from the command's input: a terminal in raw mode,
// where the chat reads the keys itself (Ctrl-C among them, also during a
// reply), or a pipe.
func newLineReader(c *cobra.Command) lineReader {
	in, ok := c.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return newPipeReader(c.InOrStdin(), c.OutOrStdout())
	}
	out := c.OutOrStdout()
	r := &termReader{fd: int(in.Fd()), out: out, keys: newKeyFeed(in)}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		r.outFd = int(f.Fd())
	} else {
		r.outFd = -1
	}
	r.t = term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{r.keys, out}, "")
	r.t.History = &r.hist
	r.t.AutoCompleteCallback = r.key
	r.state, _ = term.MakeRaw(r.fd)
	return r
}

// ctrlC is what Ctrl-C reaches the line editor as: term.Terminal ends
// ReadLine at Ctrl-C as at the end of the input, and without forgetting
// the key, so the key feed turns it into this private-use character and
// an Enter, which the editor hands to key.
const ctrlC = '\ue003'

type termReader struct {
	fd, outFd   int
	out         io.Writer
	t           *term.Terminal
	keys        *keyFeed
	state       *term.State
	hist        history
	interrupted bool // Ctrl-C ended the line being read
}

// key sees the keys the editor does not handle: Ctrl-C shows ^C on the
// line, which the Enter after it ends.
func (r *termReader) key(line string, pos int, key rune) (string, int, bool) {
	if key != ctrlC {
		return "", 0, false
	}
	r.interrupted, r.hist.skip = true, true
	line += "^C"
	return line, len(line), true
}

func (r *termReader) readLine(prompt string) (string, error) {
	if w := r.width(); w > 0 {
		_, h, _ := term.GetSize(r.outFd)
		r.t.SetSize(w, h)
	}
	r.t.SetPrompt(prompt)
	line, err := r.t.ReadLine()
	if r.interrupted {
		r.interrupted, r.hist.skip = false, false
		return strings.TrimSuffix(line, "^C"), errInterruptedLine
	}
	return line, err
}

func (r *termReader) writer() io.Writer { return r.t }

func (r *termReader) width() int {
	if r.outFd < 0 {
		return 0
	}
	w, _, err := term.GetSize(r.outFd)
	if err != nil {
		return 0
	}
	return w
}

func (r *termReader) watch(interrupt func()) func() { return r.keys.watch(interrupt) }
func (r *termReader) hangup()                       { r.keys.hangup() }

// leave writes the prompt's line end past the editor, whose writes
// would draw the prompt again, and restores the terminal.
func (r *termReader) leave(eof bool) {
	if eof {
		io.WriteString(r.out, "\r\n")
	}
	if r.state != nil {
		term.Restore(r.fd, r.state)
		r.state = nil
	}
}

// history is the editor's history of lines, without lines ended by
// Ctrl-C, empty lines, or a line again right after itself.
type history struct {
	lines []string
	skip  bool
}

func (h *history) Add(s string) {
	if h.skip || strings.TrimSpace(s) == "" || len(h.lines) > 0 && h.lines[len(h.lines)-1] == s {
		return
	}
	h.lines = append(h.lines, s)
	if len(h.lines) > 1000 {
		h.lines = h.lines[1:]
	}
}

func (h *history) Len() int { return len(h.lines) }

// At is the idx-th line back from the newest (0).
func (h *history) At(idx int) string { return h.lines[len(h.lines)-1-idx] }

// keyFeed owns the terminal's input: one goroutine reads it, so that the
// line editor and the watcher of a reply never race for a key.
type keyFeed struct {
	chunks  chan []byte
	err     error // why chunks closed
	quit    chan struct{}
	quitOne sync.Once
	mu      sync.Mutex
	pending []byte // read, not yet handed to the editor
}

func newKeyFeed(in io.Reader) *keyFeed {
	k := &keyFeed{chunks: make(chan []byte, 16), quit: make(chan struct{})}
	go func() {
		for {
			b := make([]byte, 256)
			n, err := in.Read(b)
			if n > 0 {
				k.chunks <- b[:n]
			}
			if err != nil {
				k.err = err
				close(k.chunks)
				return
			}
		}
	}()
	return k
}

// Read hands the editor keys, Ctrl-C as ctrlC and Enter.
func (k *keyFeed) Read(p []byte) (int, error) {
	k.mu.Lock()
	empty := len(k.pending) == 0
	k.mu.Unlock()
	if empty {
		var b []byte
		ok := false
		select {
		case b, ok = <-k.chunks:
		case <-k.quit:
			return 0, io.EOF
		}
		if !ok {
			return 0, k.err
		}
		k.mu.Lock()
		k.pending = append(k.pending, b...)
		k.mu.Unlock()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.pending
	if i := bytes.IndexByte(b, 3); i == 0 {
		k.pending = append([]byte(string(ctrlC)+"\r"), b[1:]...)
		b = k.pending
	} else if i > 0 {
		b = b[:i] // up to the Ctrl-C; it comes next
	}
	n := copy(p, b)
	k.pending = k.pending[n:]
	return n, nil
}

// hangup makes Read answer io.EOF.
func (k *keyFeed) hangup() { k.quitOne.Do(func() { close(k.quit) }) }

// watch calls interrupt at each Ctrl-C until stop, keeping the other
// keys for the editor.
func (k *keyFeed) watch(interrupt func()) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case b, ok := <-k.chunks:
				if !ok {
					return
				}
				if bytes.IndexByte(b, 3) >= 0 {
					interrupt()
					b = bytes.ReplaceAll(b, []byte{3}, nil)
				}
				k.mu.Lock()
				k.pending = append(k.pending, b...)
				k.mu.Unlock()
			}
		}
	}()
	return func() { close(done); <-exited }
}

// pipeReader reads lines from a pipe in a goroutine of its own, so that
// hangup can end a read the pipe would hold.
type pipeReader struct {
	lines   chan string
	err     error // why lines closed
	out     io.Writer
	quit    chan struct{}
	quitOne sync.Once
}

func newPipeReader(in io.Reader, out io.Writer) *pipeReader {
	r := &pipeReader{lines: make(chan string), out: out, quit: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case r.lines <- strings.TrimRight(sc.Text(), "\r"):
			case <-r.quit:
				return
			}
		}
		r.err = sc.Err()
		close(r.lines)
	}()
	return r
}

func (r *pipeReader) readLine(string) (string, error) {
	select {
	case line, ok := <-r.lines:
		switch {
		case ok:
			return line, nil
		case r.err != nil:
			return "", r.err
		}
	case <-r.quit:
	}
	return "", io.EOF
}

func (r *pipeReader) hangup() { r.quitOne.Do(func() { close(r.quit) }) }

func (r *pipeReader) writer() io.Writer          { return r.out }
func (r *pipeReader) width() int                 { return 0 }
func (r *pipeReader) watch(func()) (stop func()) { return func() {} }
func (r *pipeReader) leave(bool)                 {}
