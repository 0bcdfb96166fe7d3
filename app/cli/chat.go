package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"dovetail/app/runner"
	"dovetail/engine"
	"dovetail/internal/atomicfile"
	"dovetail/models/chat"
)

type chatFlags struct {
	modelFlags
	sampling
	system string
}

// sampling are the sampling flags of run and chat.
type sampling struct {
	temp, topP, minP, repeatPenalty float32
	topK                            int
	seed                            int64
}

func (s *sampling) register(c *cobra.Command) {
	fl := c.Flags()
	fl.Float32Var(&s.temp, "temp", 0.8, "temperature (0: greedy)")
	fl.Float32Var(&s.topP, "top-p", 0.95, "nucleus sampling: keep the smallest set of tokens with this much probability (1: off)")
	fl.IntVar(&s.topK, "top-k", 40, "keep the k most likely tokens (0: off)")
	fl.Float32Var(&s.minP, "min-p", 0.05, "drop tokens less likely than this fraction of the most likely (0: off)")
	fl.Float32Var(&s.repeatPenalty, "repeat-penalty", 1, "penalty for tokens among the last 64 (1: off)")
	fl.Int64Var(&s.seed, "seed", -1, "random seed (-1: a random one)")
}

// params are the sampler's settings (a random seed for -1).
func (s *sampling) params() (engine.SamplerParams, error) {
	seed := uint64(s.seed)
	if s.seed < 0 {
		seed = uint64(time.Now().UnixNano())
	}
	p := engine.SamplerParams{Temperature: s.temp, TopK: s.topK, TopP: s.topP, MinP: s.minP, RepeatPenalty: s.repeatPenalty, Seed: seed}
	return p, p.Validate()
}

func newChatCmd() *cobra.Command {
	var f chatFlags
	c := &cobra.Command{
		Use:   "chat [-m MODEL.gguf] [--system TEXT]",
		Short: "Chat with a model in the terminal",
		Long: "Chat with a model in the terminal, with its chat template: replies stream as they are\n" +
			"generated, each followed by its speed and τ. Enter sends; a line ending in \\ goes on on the\n" +
			"next line, and \"\"\" opens and closes a block of several lines. Up and down recall earlier\n" +
			"lines. Ctrl-C stops a reply; Ctrl-D or /bye leaves.\n\n" +
			"  /system TEXT   set the system prompt (no text: show it)\n" +
			"  /clear         forget the conversation\n" +
			"  /save FILE     save the conversation (JSON)\n" +
			"  /bye           leave",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return chatLoop(c, &f) },
	}
	f.modelFlags.register(c, draftHelp)
	f.sampling.register(c)
	c.Flags().StringVar(&f.system, "system", "", "system prompt")
	return c
}

// conversation is what /save writes.
type conversation struct {
	Model    string         `json:"model"`
	Messages []chat.Message `json:"messages"`
}

// chatSession is one terminal chat.
type chatSession struct {
	c       *cobra.Command
	r       *runner.Runner
	m       *runner.Model
	params  engine.SamplerParams
	system  string
	history []chat.Message // user and assistant turns
	in      lineReader
	out     io.Writer
}

func chatLoop(c *cobra.Command, f *chatFlags) error {
	params, err := f.params()
	if err != nil {
		return usageError{fmt.Errorf("chat: %v", err)}
	}
	o, err := f.options(c.ErrOrStderr())
	if err != nil {
		return err
	}
	o.Greedy = params.Temperature <= 0
	m, r, done, err := openRunner(c, f.model, &o)
	if err != nil {
		return err
	}
	defer done()
	in, restore := newLineReader(c)
	defer restore()
	s := &chatSession{c: c, r: r, m: m, params: params, system: f.system, in: in, out: in.writer()}
	fmt.Fprintf(s.out, "chatting with %s (draft %s); /bye or Ctrl-D leaves, Ctrl-C stops a reply\n", m.Name, r.Draft().Name)
	for {
		text, err := s.read()
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(s.out)
			return nil
		}
		if err != nil {
			return err
		}
		if done, err := s.handle(text); done || err != nil {
			return err
		}
	}
}

// read reads one message: a line, lines joined by a trailing \, or a
// """ block.
func (s *chatSession) read() (string, error) {
	line, err := s.in.readLine(">>> ")
	if err != nil {
		return "", err
	}
	switch {
	case strings.HasPrefix(line, `"""`):
		var b strings.Builder
		rest := strings.TrimPrefix(line, `"""`)
		for {
			if body, ok := strings.CutSuffix(rest, `"""`); ok {
				b.WriteString(body)
				return b.String(), nil
			}
			b.WriteString(rest + "\n")
			if rest, err = s.in.readLine("... "); err != nil {
				return "", err
			}
		}
	case strings.HasSuffix(line, `\`):
		var b strings.Builder
		for strings.HasSuffix(line, `\`) {
			b.WriteString(strings.TrimSuffix(line, `\`) + "\n")
			if line, err = s.in.readLine("... "); err != nil {
				return "", err
			}
		}
		b.WriteString(line)
		return b.String(), nil
	}
	return line, nil
}

// handle runs a command or sends a message; done ends the chat.
func (s *chatSession) handle(text string) (done bool, err error) {
	cmd, arg, _ := strings.Cut(strings.TrimSpace(text), " ")
	switch {
	case strings.TrimSpace(text) == "":
		return false, nil
	case cmd == "/bye" || cmd == "/exit":
		return true, nil
	case cmd == "/clear":
		s.history = nil
		fmt.Fprintln(s.out, "cleared the conversation")
	case cmd == "/system":
		if arg = strings.TrimSpace(arg); arg == "" {
			fmt.Fprintf(s.out, "system prompt: %q\n", s.system)
		} else {
			s.system = arg
			fmt.Fprintln(s.out, "set the system prompt")
		}
	case cmd == "/save":
		s.save(strings.TrimSpace(arg))
	case cmd == "/help" || cmd == "/?":
		fmt.Fprintln(s.out, "/system TEXT, /clear, /save FILE, /bye; \"\"\" for several lines")
	case strings.HasPrefix(cmd, "/"):
		fmt.Fprintf(s.out, "unknown command %s (/help lists them)\n", cmd)
	default:
		return false, s.reply(text)
	}
	return false, nil
}

// save writes the conversation to path, private to the user.
func (s *chatSession) save(path string) {
	if path == "" {
		fmt.Fprintln(s.out, "usage: /save FILE")
		return
	}
	conv := conversation{Model: s.m.Name, Messages: s.messages()}
	err := atomicfile.WriteMode(path, 0o600, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(conv)
	})
	if err != nil {
		fmt.Fprintf(s.out, "not saved: %v\n", err)
		return
	}
	fmt.Fprintf(s.out, "saved the conversation to %s\n", path)
}

// messages is the conversation with its system prompt.
func (s *chatSession) messages() []chat.Message {
	var out []chat.Message
	if s.system != "" {
		out = append(out, chat.Message{Role: "system", Content: s.system})
	}
	return append(out, s.history...)
}

// reply sends text and streams the model's answer; Ctrl-C stops it.
func (s *chatSession) reply(text string) error {
	s.history = append(s.history, chat.Message{Role: "user", Content: text})
	prompt, err := s.fit()
	if err != nil {
		s.history = s.history[:len(s.history)-1]
		fmt.Fprintf(s.out, "%v\n", err)
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s.in.cooked() // Ctrl-C is a signal while the model writes
	defer s.in.raw()
	res, err := s.r.Slot(0).GenerateText(ctx, runner.TextRequest{Prompt: prompt, Sampler: s.params,
		OnText: func(p runner.Piece) error {
			_, err := io.WriteString(s.out, p.Text)
			return err
		}})
	fmt.Fprintln(s.out)
	if err != nil && ctx.Err() == nil {
		return err
	}
	s.history = append(s.history, chat.Message{Role: "assistant", Content: res.Text})
	st := res.Stats
	stopped := ""
	if ctx.Err() != nil {
		stopped = ", stopped"
	}
	tau := "-"
	if st.Rounds > 0 {
		tau = fmt.Sprintf("%.2f", st.Tau())
	}
	fmt.Fprintf(s.out, "[%d tokens, %.1f tokens/s, τ %s%s]\n", st.GenTokens, st.GenTokensPerSec(), tau, stopped)
	return nil
}

// fit is the conversation's tokens, its oldest turns dropped while it
// leaves the answer less than a quarter of the context.
func (s *chatSession) fit() ([]int, error) {
	ctx := s.r.Context()
	for {
		ids, err := s.m.ChatTokens(s.messages())
		if err != nil {
			return nil, fmt.Errorf("the chat template refused the conversation: %v", err)
		}
		if len(ids) <= ctx*3/4 || len(s.history) <= 1 {
			if len(ids) >= ctx {
				return nil, fmt.Errorf("the message has %d tokens; the context holds %d", len(ids), ctx)
			}
			return ids, nil
		}
		s.history = s.history[min(2, len(s.history)-1):] // a user turn and its answer
	}
}

// lineReader reads the user's lines: with editing and history on a
// terminal, plainly from a pipe.
type lineReader interface {
	readLine(prompt string) (string, error)
	writer() io.Writer
	raw()    // back to reading keys
	cooked() // the terminal as usual, Ctrl-C a signal
}

// newLineReader reads from the command's input; restore puts a terminal
// back as it was.
func newLineReader(c *cobra.Command) (lineReader, func()) {
	if f, ok := c.InOrStdin().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		t := &termReader{fd: int(f.Fd()), t: term.NewTerminal(struct {
			io.Reader
			io.Writer
		}{f, c.OutOrStdout()}, "")}
		t.raw()
		return t, t.cooked
	}
	return &pipeReader{sc: bufio.NewScanner(c.InOrStdin()), out: c.OutOrStdout()}, func() {}
}

type termReader struct {
	fd    int
	t     *term.Terminal
	state *term.State
}

func (r *termReader) readLine(prompt string) (string, error) {
	r.t.SetPrompt(prompt)
	return r.t.ReadLine()
}

func (r *termReader) writer() io.Writer { return r.t }

func (r *termReader) raw() {
	if r.state == nil {
		r.state, _ = term.MakeRaw(r.fd)
	}
}

func (r *termReader) cooked() {
	if r.state != nil {
		term.Restore(r.fd, r.state)
		r.state = nil
	}
}

type pipeReader struct {
	sc  *bufio.Scanner
	out io.Writer
}

func (r *pipeReader) readLine(string) (string, error) {
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return strings.TrimRight(r.sc.Text(), "\r"), nil
}

func (r *pipeReader) writer() io.Writer { return r.out }
func (r *pipeReader) raw()              {}
func (r *pipeReader) cooked()           {}
