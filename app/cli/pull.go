package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"dovetail/app/runner"
	"dovetail/app/runner/pull"
)

func newPullCmd() *cobra.Command {
	var insecure, asJSON bool
	c := &cobra.Command{
		Use:   "pull NAME [--insecure] [--json]",
		Short: "Download a model by name from ollama's registry or Hugging Face",
		Long: "Download a model into your models folder ($DOVETAIL_MODELS, by default a \"models\" folder\n" +
			"in Dovetail's data folder: ~/.local/share/dovetail/models on Linux), where run, chat, serve\n" +
			"and the desktop app find it by NAME. NAME is ollama's (llama3.2:1b, qwen2.5:0.5b,\n" +
			"NAMESPACE/MODEL:TAG, HOST[:PORT]/NAMESPACE/MODEL:TAG; --insecure for plain HTTP to a private\n" +
			"registry) or a Hugging Face GGUF repository's: hf.co/ORG/REPO:QUANT (Hugging Face picks\n" +
			"Q4_K_M, or the nearest, when QUANT is left out) or hf.co/ORG/REPO/FILE.gguf. A repository\n" +
			"named alone (hf.co/ORG/REPO) whose config.json describes an EAGLE draft is pulled as one:\n" +
			"config.json and its safetensors weights into the models folder's drafts/hf.co/ORG/REPO,\n" +
			"which --draft eagle:FOLDER runs and `dovetail drafts` lists. HF_TOKEN and\n" +
			"HF_ENDPOINT are read as Hugging Face's own tools read them; DOVETAIL_REGISTRY names a mirror\n" +
			"of ollama's registry. Each file's SHA-256 is checked before it is kept; Ctrl-C keeps what\n" +
			"was downloaded, and pulling again resumes it. A terminal shows a progress bar; --json\n" +
			"prints ollama's progress objects, one a line.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("pull: want one model name (dovetail pull NAME), got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return runPull(c, args[0], insecure, asJSON) },
	}
	c.Flags().BoolVar(&insecure, "insecure", false, "plain HTTP to a private registry (HOST[:PORT]/NAMESPACE/MODEL:TAG)")
	c.Flags().BoolVar(&asJSON, "json", false, "print each progress step as a JSON object, one a line")
	return c
}

func runPull(c *cobra.Command, name string, insecure, asJSON bool) error {
	if _, err := pull.Parse(name); err != nil {
		return usageError{fmt.Errorf("pull: %v", err)}
	}
	out := c.OutOrStdout()
	v := &pullView{w: out, tty: isTerminal(out)}
	if asJSON {
		v.enc = json.NewEncoder(out)
	}
	ctx, stop := interruptible()
	defer stop()
	m, err := pull.Pull(ctx, name, pull.Options{Insecure: insecure, Progress: v.show})
	v.endLine()
	var intr *pull.Interrupted
	switch {
	case errors.As(err, &intr):
		return interrupted{fmt.Errorf("pull: %v", err)}
	case errors.Is(err, context.Canceled):
		return interrupted{fmt.Errorf("pull %s: interrupted", name)}
	case err != nil:
		return fmt.Errorf("pull: %w", err)
	}
	switch {
	case asJSON:
	case m.Draft != nil:
		fmt.Fprintln(out, pulledDraftLine(m))
	default:
		fmt.Fprintf(out, "pulled %s (%s): %s\n", m.Name, runner.HumanBytes(uint64(m.Size)), m.Path)
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// pullView shows a pull's progress: JSON lines, a bar redrawn on a
// terminal (bytes, rate, ETA), or else a line a step and one each tenth
// of a file.
type pullView struct {
	w     io.Writer
	enc   *json.Encoder
	tty   bool
	drawn bool // a bar is on the line

	digest    string // the file the bar is for
	start     time.Time
	startDone int64
	lastDraw  time.Time
	lastTenth int64
}

func (v *pullView) show(p pull.Progress) {
	if v.enc != nil {
		v.enc.Encode(p)
		return
	}
	if p.Digest == "" || !strings.HasPrefix(p.Status, "pulling ") {
		v.endLine()
		fmt.Fprintln(v.w, p.Status)
		return
	}
	now := time.Now()
	if p.Digest != v.digest {
		v.endLine()
		v.digest, v.start, v.startDone, v.lastTenth = p.Digest, now, p.Completed, -1
		v.lastDraw = time.Time{}
	}
	if !v.tty {
		if tenth := p.Completed * 10 / max(p.Total, 1); tenth != v.lastTenth {
			v.lastTenth = tenth
			fmt.Fprintf(v.w, "%s: %d%% of %s\n", p.Status, tenth*10, runner.HumanBytes(uint64(p.Total)))
		}
		return
	}
	if now.Sub(v.lastDraw) < 100*time.Millisecond && p.Completed < p.Total {
		return
	}
	v.lastDraw = now
	fmt.Fprintf(v.w, "\r%s %s", p.Status, bar(p, now.Sub(v.start), p.Completed-v.startDone))
	v.drawn = true
}

// bar is "45% [=====     ] 312.0 MiB/700.0 MiB  12.3 MiB/s  ETA 32s".
func bar(p pull.Progress, took time.Duration, got int64) string {
	frac := float64(p.Completed) / float64(max(p.Total, 1))
	const width = 20
	fill := min(int(frac*width), width)
	s := fmt.Sprintf("%3.0f%% [%s%s] %s/%s", 100*frac, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		runner.HumanBytes(uint64(p.Completed)), runner.HumanBytes(uint64(p.Total)))
	if rate := float64(got) / took.Seconds(); got > 0 && took > 0 {
		eta := time.Duration(float64(p.Total-p.Completed) / rate * float64(time.Second)).Round(time.Second)
		s += fmt.Sprintf("  %s/s  ETA %v", runner.HumanBytes(uint64(rate)), eta)
	}
	return s + "   "
}

func (v *pullView) endLine() {
	if v.drawn {
		fmt.Fprintln(v.w)
		v.drawn = false
	}
}
