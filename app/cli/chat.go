package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/engine"
	"dovetail/models/chat"
)

type chatFlags struct {
	modelFlags
	sampling
	system string
	models string
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

// chatCommands is the commands' help, in the command's help and /help.
const chatCommands = `  /set parameter NAME VALUE  temperature, top_k, top_p, min_p, repeat_penalty, seed,
                             num_predict, num_ctx
  /set system TEXT           the system prompt (also /system TEXT)
  /set wordwrap|nowordwrap   wrap replies between words at the terminal's width, or not
  /show info|parameters|system|template
  /load MODEL                another model: the conversation starts anew, the settings stay
  /save FILE                 save the conversation as JSON, never over a file (/save! FILE replaces it)
  /clear                     forget the conversation
  /bye                       leave (or Ctrl-D)
  /?, /help                  this list`

func newChatCmd() *cobra.Command {
	var f chatFlags
	c := &cobra.Command{
		Use:   "chat [MODEL] [--system TEXT]",
		Short: "Chat with a model in the terminal",
		Long: "Chat with a model in the terminal, with its chat template: replies stream as they are\n" +
			"generated, each followed by its speed and τ. MODEL is a GGUF file, or a model's name as\n" +
			"`serve --models` lists it (the user's pulled, ollama and LM Studio models, the files under --models,\n" +
			"the embedded model); -m says the same; without either, the embedded model chats.\n" +
			"Enter sends; a line ending in \\ goes on on the next line, and \"\"\" opens and closes a block\n" +
			"of several lines. Up and down recall earlier lines. Ctrl-C clears the line, or stops a\n" +
			"reply (the conversation stays); Ctrl-D or /bye leaves.\n\n" + chatCommands,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				if f.model != "" {
					return usageError{fmt.Errorf("chat: name the model once: -m %s or %s", f.model, args[0])}
				}
				f.model = args[0]
			}
			return chatLoop(c, &f)
		},
	}
	f.modelFlags.register(c, draftHelp)
	f.sampling.register(c)
	c.Flags().StringVar(&f.system, "system", "", "system prompt")
	c.Flags().StringVar(&f.models, "models", "", "a folder of GGUF models MODEL may name, besides the user's pulled, ollama and LM Studio models")
	c.Flags().Lookup("model").Usage = "GGUF model file or model name (default: the embedded TinyStories-656K)"
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
	f       *chatFlags
	opts    runner.Options // from the flags: /load and num_ctx start from them
	r       *runner.Runner
	m       *runner.Model
	entry   discover.Model // the model's file and name
	closeM  func()
	params  runner.Params // the model's own defaults (a pulled model's)
	quit    chan struct{} // closed at SIGTERM or SIGHUP
	set     chatSettings
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
	s := &chatSession{c: c, f: f, opts: o,
		set: chatSettings{params: params, seed: f.seed, numPredict: -1, numCtx: f.ctx, system: f.system, wrap: true}}
	e, err := findModel(f.model, f.models)
	if err != nil {
		return usageError{fmt.Errorf("chat: %v", err)}
	}
	if err := s.open(e); err != nil {
		return err
	}
	defer s.close()
	s.in = newLineReader(c)
	s.out = s.in.writer()
	eof := false
	defer func() { s.in.leave(eof) }()
	defer s.hangupOn(syscall.SIGTERM, syscall.SIGHUP)()
	fmt.Fprintf(s.out, "chatting with %s (draft %s); /? lists the commands, /bye or Ctrl-D leaves, Ctrl-C stops a reply\n",
		s.m.Name, s.r.Draft().Name)
	for {
		text, err := s.read()
		switch {
		case errors.Is(err, errInterruptedLine):
			if text == "" {
				fmt.Fprintln(s.out, "Use Ctrl + d or /bye to exit.")
			}
			continue
		case errors.Is(err, io.EOF):
			eof = true
			if s.hungUp() {
				return errInterrupted // the draft is saved as the chat closes
			}
			return nil
		case err != nil:
			return err
		}
		if done, err := s.handle(text); done || err != nil {
			return err
		}
	}
}

// hangupOn ends the chat as Ctrl-D does when one of sigs comes: a reply
// under way stops, the terminal is given back as it was, and the draft
// is saved, where the signal's default would kill the process with the
// terminal still raw.
func (s *chatSession) hangupOn(sigs ...os.Signal) (stop func()) {
	s.quit = make(chan struct{})
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			close(s.quit)
			s.in.hangup()
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

func (s *chatSession) hungUp() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// read reads one message: a line, lines joined by a trailing \, or a
// """ block. Ctrl-C drops the message, with the text it dropped.
func (s *chatSession) read() (string, error) {
	line, err := s.in.readLine(">>> ")
	if err != nil {
		return line, err
	}
	var b strings.Builder
	more := func() error {
		if line, err = s.in.readLine("... "); err != nil {
			b.WriteString(line) // what Ctrl-C drops
		}
		return err
	}
	switch {
	case strings.HasPrefix(line, `"""`):
		rest := strings.TrimPrefix(line, `"""`)
		for {
			if body, ok := strings.CutSuffix(rest, `"""`); ok {
				b.WriteString(body)
				return b.String(), nil
			}
			b.WriteString(rest + "\n")
			if err := more(); err != nil {
				return b.String(), err
			}
			rest = line
		}
	case strings.HasSuffix(line, `\`):
		for strings.HasSuffix(line, `\`) {
			b.WriteString(strings.TrimSuffix(line, `\`) + "\n")
			if err := more(); err != nil {
				return b.String(), err
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
	arg = strings.TrimSpace(arg)
	switch {
	case strings.TrimSpace(text) == "":
		return false, nil
	case cmd == "/bye" || cmd == "/exit":
		return true, nil
	case cmd == "/clear":
		s.history = nil
		fmt.Fprintln(s.out, "cleared the conversation")
	case cmd == "/system":
		s.setSystem(arg)
	case cmd == "/set":
		return false, s.setCmd(arg)
	case cmd == "/show":
		s.show(arg)
	case cmd == "/load":
		return false, s.load(arg)
	case cmd == "/save" || cmd == "/save!":
		s.save(arg, cmd == "/save!")
	case cmd == "/help" || cmd == "/?":
		fmt.Fprintln(s.out, chatCommands+"\n"+`  """ opens and closes a block of several lines; a line ending in \ goes on on the next`)
	case strings.HasPrefix(cmd, "/"):
		fmt.Fprintf(s.out, "unknown command %s (/? lists them)\n", cmd)
	default:
		return false, s.reply(text)
	}
	return false, nil
}

// messages is the conversation with its system prompt.
func (s *chatSession) messages() []chat.Message {
	var out []chat.Message
	if s.set.system != "" {
		out = append(out, chat.Message{Role: "system", Content: s.set.system})
	}
	return append(out, s.history...)
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
