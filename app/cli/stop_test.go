package cli

import (
	"bytes"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C on a run whose draft is adapting, its trainer busy with long
// steps: the run exits within a second or so (130), its text ending in a
// newline.
func TestRunInterruptWithTrainerExitsPromptly(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { runInterrupted(t, sig) })
	}
}

// runInterrupted stops a run with sig while its trainer has work: SIGTERM
// (docker stop, systemd) as Ctrl-C, the draft saved and the text ended.
func runInterrupted(t *testing.T, sig syscall.Signal) {
	c := command("run", "-p", "Once upon a time", "-n", "0", "--ctx", "16384", "--ignore-eos", "--temp", "0",
		"--adapt-window", "64", "--adapt-batch", "32", "--adapt-min-records", "64", "--adapt-no-save")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Thousands of positions verified: the trainer has records to train on.
	head := make([]byte, 6000)
	if _, err := io.ReadFull(stdout, head); err != nil {
		c.Process.Kill()
		t.Fatalf("no text before the interrupt: %v (%s)", err, stderr.String())
	}
	begin := time.Now()
	c.Process.Signal(sig)
	rest, _ := io.ReadAll(stdout)
	c.Wait()
	took := time.Since(begin)
	t.Logf("exited %v after %v", took, sig)
	if code := c.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if took > 3*time.Second {
		t.Errorf("exited %v after %v, want about a second at most", took, sig)
	}
	if out := string(head) + string(rest); !strings.HasSuffix(out, "\n") {
		t.Errorf("the text ends with %q, not a newline", out[max(0, len(out)-20):])
	}
}
