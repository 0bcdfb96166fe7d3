package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dovetail chat in a terminal: a message streams its reply and a line of
// speed and τ; a """ block is one message; /system, /save and /clear do
// what they say; up recalls the last line; Ctrl-D leaves.
func TestChatInTerminal(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "conv.json")
	p := startChat(t, 80, "--temp", "0", "--draft", "ngram", "--plan=false")
	expectN, expect, send := p.expectN, p.expect, p.send
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
	if err := p.wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, p.seen)
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

// Piped in, chat reads lines and leaves at the end of its input; the
// embedded model's end-of-story text is not printed.
func TestChatPiped(t *testing.T) {
	c := command("chat", "--temp", "0", "--draft", "none")
	c.Stdin = strings.NewReader("Once upon a time\n/bye\nnever read\n")
	b, err := c.CombinedOutput()
	if err != nil || strings.Count(string(b), "tokens/s") != 1 || strings.Contains(string(b), "end_story") {
		t.Errorf("%v:\n%s", err, b)
	}
}
