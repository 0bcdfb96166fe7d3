package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"dovetail/models/synth"
	"dovetail/models/synth/synthtest"
	"dovetail/quant"
)

// Ctrl-C at the prompt clears the line and the chat goes on; a second
// one on the empty line says how to leave; the line dropped is not in
// the history, the conversation is kept; Ctrl-D leaves with exit status
// 0, ending the prompt's line so the shell's starts on its own.
func TestChatCtrlCAtPrompt(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "conv.json")
	p := startChat(t, 80, "--temp", "0", "--draft", "none")
	p.expectN(">>> ", 1)
	p.send("Once upon a time\r")
	p.expect("tokens/s, τ ")
	p.send("a line to drop")
	p.expect("a line to drop")
	p.send("\x03")
	p.expect("a line to drop^C\r\n>>> ")
	if strings.Contains(p.seen, "Use Ctrl + d") {
		t.Errorf("the first Ctrl-C, on a line with text, gave the hint:\n%q", p.seen)
	}
	p.send("\x03")
	p.expect(">>> ^C\r\nUse Ctrl + d or /bye to exit.\r\n>>> ")
	p.send("\x1b[A") // up: the last line sent, not the one dropped
	p.expect("Once upon a time")
	p.send("\x15/save " + saved + "\r")
	p.expect("saved the conversation")
	p.send("\x04")
	if err := p.wait(); err != nil {
		t.Fatalf("exit: %v\n%q", err, p.seen)
	}
	if !strings.HasSuffix(p.seen, ">>> \r\n") {
		t.Errorf("the output ends %q, not with the prompt's line ended", p.seen[max(0, len(p.seen)-40):])
	}
	conv := readConversation(t, saved)
	if len(conv.Messages) != 2 || conv.Messages[0].Content != "Once upon a time" || conv.Messages[1].Role != "assistant" {
		t.Errorf("conversation after Ctrl-C: %+v", conv.Messages)
	}
}

// /bye leaves on a line of its own too, and Ctrl-C inside a """ block
// drops the block.
func TestChatByeAndBlockCtrlC(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "conv.json")
	p := startChat(t, 80, "--temp", "0", "--draft", "none")
	p.expectN(">>> ", 1)
	p.send(`"""first line` + "\r")
	p.expect("... ")
	p.send("\x03")
	p.expect("... ^C\r\n>>> ")
	p.send("/save " + saved + "\r")
	p.expect("saved the conversation")
	p.send("/bye\r")
	if err := p.wait(); err != nil {
		t.Fatalf("exit: %v\n%q", err, p.seen)
	}
	if !strings.HasSuffix(p.seen, "/bye\r\n") {
		t.Errorf("the output ends %q", p.seen[max(0, len(p.seen)-40):])
	}
	if conv := readConversation(t, saved); len(conv.Messages) != 0 {
		t.Errorf("the dropped block was sent: %+v", conv.Messages)
	}
}

// Ctrl-C during a reply stops it: nothing of the reply comes after the
// ^C, the chat goes on, and the conversation keeps what was shown.
func TestChatCtrlCStopsReply(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "conv.json")
	p := startChat(t, 80, "-m", slowModel(t), "--temp", "1", "--seed", "1", "--draft", "none")
	p.expectN(">>> ", 1)
	p.send("hello\r")
	p.expect("hello\r\n")
	p.expect(" t") // the stand-in vocabulary's words: the reply has begun
	p.send("\x03")
	p.expect("stopped]\r\n>>> ")
	if !regexp.MustCompile(`\^C\r\n\[\d+ tokens, [^\]]*, stopped\]\r\n>>> $`).MatchString(p.seen) {
		t.Errorf("more after ^C than the reply's end:\n%q", p.seen[max(0, len(p.seen)-200):])
	}
	p.send("/save " + saved + "\r")
	p.expect("saved the conversation")
	p.send("\x04")
	if err := p.wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	conv := readConversation(t, saved)
	if len(conv.Messages) != 2 || conv.Messages[1].Role != "assistant" || !strings.Contains(conv.Messages[1].Content, " t") {
		t.Errorf("conversation after a stopped reply: %+v", conv.Messages)
	}
}

// slowModel is a random-weight model whose replies run for seconds: its
// stand-in vocabulary's end token is one of 4096, and its context long.
func slowModel(t *testing.T) string {
	t.Helper()
	sh := synthtest.Shape(t, "dim=256,layers=4,heads=4,ffn=768,vocab=4096,ctx=8192")
	return synthtest.File(t, sh, synth.Options{Type: quant.Q8_0, Seed: 1})
}

func readConversation(t *testing.T, path string) conversation {
	t.Helper()
	var conv conversation
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &conv) != nil {
		t.Fatalf("saved %q: %v", b, err)
	}
	return conv
}

// In a terminal 30 columns wide a reply's lines wrap between words; after
// /set nowordwrap the same reply comes unbroken.
func TestChatWrapsReplies(t *testing.T) {
	p := startChat(t, 30, "--temp", "0", "--draft", "none")
	p.expectN(">>> ", 1)
	reply := func() string {
		t.Helper()
		from := len(p.seen)
		p.send("/clear\rOnce upon a time\r")
		p.expect("tokens/s, τ ")
		s := p.seen[from:]
		s = s[strings.Index(s, "Once upon a time\r\n")+len("Once upon a time\r\n"):]
		return strings.ReplaceAll(s[:strings.LastIndex(s, "\r\n[")], "\r\n", "\n")
	}
	wrapped := screen(t, reply())
	p.send("/set nowordwrap\r")
	p.expect("set nowordwrap")
	plain := reply()
	if strings.Contains(plain, "\x1b") {
		t.Errorf("/set nowordwrap, and still taken back:\n%q", plain)
	}
	long := false
	for _, l := range strings.Split(plain, "\n") {
		long = long || cols(l) > 29
	}
	for _, l := range wrapped {
		if cols(l) > 29 {
			t.Errorf("wrapped, a line of %d columns: %q", cols(l), l)
		}
	}
	if !long || strings.Join(strings.Fields(strings.Join(wrapped, " ")), " ") != strings.Join(strings.Fields(plain), " ") {
		t.Errorf("wrapped:\n%s\nplain:\n%s", strings.Join(wrapped, "\n"), plain)
	}
	p.send("\x04")
	p.wait()
}

// SIGTERM and SIGHUP end the chat as Ctrl-D does: the terminal is given
// back as it was (echo on), the line ended, and the exit is 130, where
// the signals' default left the terminal raw.
func TestChatHangupRestoresTerminal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startChat(t, 80, "--temp", "0", "--draft", "none")
			p.expectN(">>> ", 1)
			raw, err := unix.IoctlGetTermios(int(p.ptmx.Fd()), unix.TCGETS)
			if err != nil {
				t.Skipf("no termios: %v", err)
			}
			if raw.Lflag&unix.ECHO != 0 {
				t.Fatalf("the chat's prompt has echo on: not raw")
			}
			p.c.Process.Signal(sig)
			err = p.wait()
			if code := p.c.ProcessState.ExitCode(); code != 130 {
				t.Fatalf("exit %d (%v) after %v:\n%q", code, err, sig, p.seen)
			}
			after, err := unix.IoctlGetTermios(int(p.ptmx.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			if after.Lflag&unix.ECHO == 0 {
				t.Errorf("after %v the terminal is still raw (echo off)", sig)
			}
			if !strings.HasSuffix(p.seen, "\r\n") {
				t.Errorf("the output ends %q, not with the line ended", p.seen[max(0, len(p.seen)-40):])
			}
		})
	}
}
