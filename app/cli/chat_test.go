package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// dovetail chat in a terminal: a message streams its reply and a line of
// speed and τ; a """ block is one message; /system, /save and /clear do
// what they say; up recalls the last line; Ctrl-D leaves.
func TestChatInTerminal(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "conv.json")
	c := command("chat", "--temp", "0", "--draft", "ngram", "--plan=false")
	ptmx, err := pty.Start(c)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	out := make(chan string, 1024)
	go func() {
		r := bufio.NewReader(ptmx)
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				b.Write(buf[:n])
				out <- b.String()
			}
			if err != nil {
				close(out)
				return
			}
		}
	}()
	seen := ""
	expectN := func(what string, n int) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for strings.Count(seen, what) < n {
			select {
			case s, ok := <-out:
				if !ok {
					t.Fatalf("the chat ended before %q:\n%s", what, seen)
				}
				seen = s
			case <-deadline:
				t.Fatalf("no %q in:\n%s", what, seen)
			}
		}
	}
	expect := func(what string) { t.Helper(); expectN(what, strings.Count(seen, what)+1) }
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(ptmx, s); err != nil {
			t.Fatal(err)
		}
	}
	expectN(">>> ", 1)
	send("Once upon a time\r")
	expectN("tokens/s, τ ", 1)
	send("/system tell stories\r")
	expectN("set the system prompt", 1)
	send(`"""Lily` + "\r" + `and Tom"""` + "\r")
	expectN("tokens/s, τ ", 2)
	send("/save " + saved + "\r")
	expectN("saved the conversation", 1)
	send("\x1b[A") // up: the last line again
	expect("/save " + saved)
	send("\x15/clear\r") // Ctrl-U clears the recalled line first
	expectN("cleared the conversation", 1)
	send("\x04") // Ctrl-D
	if err := c.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, seen)
	}
	var conv conversation
	b, err := os.ReadFile(saved)
	if err != nil || json.Unmarshal(b, &conv) != nil {
		t.Fatalf("saved %q: %v", b, err)
	}
	if len(conv.Messages) != 5 || conv.Messages[0].Role != "system" || conv.Messages[1].Content != "Once upon a time" ||
		conv.Messages[3].Content != "Lily\nand Tom" || conv.Messages[4].Role != "assistant" {
		t.Errorf("saved conversation %+v", conv.Messages)
	}
	if st, _ := os.Stat(saved); st.Mode().Perm() != 0o600 {
		t.Errorf("saved with mode %v", st.Mode())
	}
}

// Piped in, chat reads lines and leaves at the end of its input.
func TestChatPiped(t *testing.T) {
	c := command("chat", "--temp", "0", "--draft", "none")
	c.Stdin = strings.NewReader("Once upon a time\n/bye\nnever read\n")
	b, err := c.CombinedOutput()
	if err != nil || strings.Count(string(b), "tokens/s") != 1 {
		t.Errorf("%v:\n%s", err, b)
	}
}
