package cli

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"dovetail/app/runner/pull"
)

// registry is an ollama registry serving tiny:1b (a real tiny model);
// with stall, the blob's body stops halfway until the client goes.
func registry(t *testing.T, stall bool) (url, digest string) {
	t.Helper()
	gguf, err := os.ReadFile("../../testdata/models/stories260K/stories260K-Q4_0-mixed.gguf")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(gguf)
	digest = "sha256:" + hex.EncodeToString(sum[:])
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/library/tiny/manifests/1b":
			fmt.Fprintf(w, `{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":%q,"size":%d}]}`, digest, len(gguf))
		case "/v2/library/tiny/blobs/" + digest:
			w.Header().Set("Content-Length", fmt.Sprint(len(gguf)))
			if !stall {
				w.Write(gguf)
				return
			}
			w.Write(gguf[:len(gguf)/2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`)
		}
	}))
	t.Cleanup(s.Close)
	return s.URL, digest
}

func TestPullCommand(t *testing.T) {
	url, digest := registry(t, false)
	dir := t.TempDir()
	t.Setenv("DOVETAIL_REGISTRY", url)
	t.Setenv("DOVETAIL_MODELS", dir)
	out, errOut, code := runCLI(t, "pull", "tiny:1b")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	short := strings.TrimPrefix(digest, "sha256:")[:12]
	for _, want := range []string{"pulling manifest\n", "pulling " + short + ": 0% of 270.5 KiB\n", "pulling " + short + ": 100% of 270.5 KiB\n",
		"verifying sha256 digest\n", "writing manifest\n", "success\n", "pulled tiny:1b (270.5 KiB): " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if m, ok, _ := pull.Find(dir, "tiny:1b"); !ok || m.Digest != digest {
		t.Errorf("not pulled: %+v", m)
	}
	// --json: ollama's progress objects, one a line, ending in success.
	out, errOut, code = runCLI(t, "pull", "--json", "tiny:1b")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var steps []pull.Progress
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var p pull.Progress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		steps = append(steps, p)
	}
	if len(steps) < 4 || steps[0].Status != "pulling manifest" || steps[len(steps)-1].Status != "success" ||
		steps[1].Digest != digest || steps[1].Total != 276992 {
		t.Errorf("steps = %+v", steps)
	}
}

func TestPullCommandErrors(t *testing.T) {
	url, _ := registry(t, false)
	t.Setenv("DOVETAIL_REGISTRY", url)
	t.Setenv("DOVETAIL_MODELS", t.TempDir())
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pull"}, 2, "pull: want one model name"},
		{[]string{"pull", "a", "b"}, 2, "pull: want one model name"},
		{[]string{"pull", "../etc/passwd"}, 2, `pull: model name "../etc/passwd"`},
		{[]string{"pull", "hf.co/org/repo/notes.txt"}, 2, "must be a .gguf file"},
		{[]string{"pull", "nosuch:7b"}, 1, "pull: nosuch:7b: not found (404) (manifest unknown) at " + url},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%q: exit %d, %q; want exit %d and one line with %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// Ctrl-C during a pull exits 130 saying where the partial file is kept.
func TestPullCommandInterrupted(t *testing.T) {
	url, digest := registry(t, true)
	dir := t.TempDir()
	c := command("pull", "tiny:1b")
	c.Env = append(c.Env, "DOVETAIL_REGISTRY="+url, "DOVETAIL_MODELS="+dir)
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(dir, "blobs", "sha256-"+strings.TrimPrefix(digest, "sha256:")+"-partial")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := os.Stat(partial); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatal("no partial file")
		}
	}
	c.Process.Signal(syscall.SIGINT)
	c.Wait()
	if code := c.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "kept in "+partial+": pull again to resume") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if st, err := os.Stat(partial); err != nil || st.Size() == 0 {
		t.Errorf("the partial file is gone: %v", err)
	}
}

func TestPullBar(t *testing.T) {
	got := bar(pull.Progress{Status: "pulling x", Total: 100 << 20, Completed: 50 << 20}, 2*time.Second, 20<<20)
	want := " 50% [==========          ] 50.0 MiB/100.0 MiB  10.0 MiB/s  ETA 5s   "
	if got != want {
		t.Errorf("bar = %q, want %q", got, want)
	}
}
