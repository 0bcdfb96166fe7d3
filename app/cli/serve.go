package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"dovetail/app/server"
	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/models/chat"
)

type serveFlags struct {
	model    string
	host     string
	port     int
	apiKey   string
	parallel int
	queue    int
	threads  int
	ctx      int
	draft    string
	tree     engine.TreeParams
	adapt    adaptFlags
	plan     bool
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve [-m MODEL.gguf] [--host 127.0.0.1] [--port 11435]",
		Short: "Serve an OpenAI-compatible API (chat, completions, models, health, metrics)",
		Long: "Serve the model over HTTP with OpenAI's API: POST /v1/chat/completions and\n" +
			"/v1/completions (streamed with \"stream\": true), GET /v1/models, /health and\n" +
			"Prometheus /metrics. It listens on loopback only unless --host says otherwise;\n" +
			"SIGINT or SIGTERM stops it, letting running generations finish for up to 10 s.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("serve: unexpected argument %q (a model file goes after -m)", args[0])}
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error { return serve(c, f) },
	}
	fl := c.Flags()
	fl.StringVarP(&f.model, "model", "m", "", "GGUF model file (default: the embedded TinyStories-656K)")
	fl.StringVar(&f.host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface; use --api-key then)")
	fl.IntVar(&f.port, "port", 11435, "TCP port (0: any free port)")
	fl.StringVar(&f.apiKey, "api-key", "", "require 'Authorization: Bearer KEY' on /v1 requests (default: $DOVETAIL_API_KEY)")
	fl.IntVar(&f.parallel, "parallel", 1, "sequences generated at the same time, each with its own KV cache")
	fl.IntVar(&f.queue, "queue", 16, "requests that may wait for a free sequence; more get 429")
	fl.IntVarP(&f.threads, "threads", "t", runtime.NumCPU(), "CPU threads, split between the parallel sequences")
	fl.IntVarP(&f.ctx, "ctx", "c", 0, "context length per sequence (0: the model's)")
	fl.StringVar(&f.draft, "draft", "auto", "speculative decoding: none, ngram, dgf:PATH, or auto (the model's DGF draft; with --adapt background, a new one that learns when it has none)")
	fl.IntVar(&f.tree.TopK, "tree-k", engine.ServerTree.TopK, "draft tree: children per expanded node")
	fl.IntVar(&f.tree.Depth, "tree-depth", engine.ServerTree.Depth, "draft tree: expansion rounds")
	fl.IntVar(&f.tree.Tokens, "tree-tokens", engine.ServerTree.Tokens, "draft tree: most nodes verified per round (γ)")
	fl.BoolVar(&f.plan, "plan", true, "let the cost model choose the tree, and decode without drafting while drafting would be slower")
	f.adapt.register(c)
	return c
}

func serve(c *cobra.Command, f serveFlags) error {
	switch {
	case f.port < 0 || f.port > 65535:
		return usageError{fmt.Errorf("serve: --port %d out of range [0, 65535]", f.port)}
	case f.parallel < 1 || f.parallel > 256:
		return usageError{fmt.Errorf("serve: --parallel %d out of range [1, 256]", f.parallel)}
	case f.queue < 0:
		return usageError{fmt.Errorf("serve: --queue %d must not be negative", f.queue)}
	case f.threads < 1 || f.threads > 1024:
		return usageError{fmt.Errorf("serve: --threads %d out of range [1, 1024]", f.threads)}
	case f.ctx < 0:
		return usageError{fmt.Errorf("serve: --ctx %d must not be negative", f.ctx)}
	}
	if f.apiKey == "" {
		f.apiKey = os.Getenv("DOVETAIL_API_KEY")
	}
	if err := f.tree.Validate(); err != nil {
		return usageError{fmt.Errorf("serve: %v", err)}
	}
	adapt, err := f.adapt.settings()
	if err != nil {
		return usageError{fmt.Errorf("serve: %v", err)}
	}
	if adapt.mode == engine.AdaptPerRequest && f.parallel > 1 {
		return usageError{fmt.Errorf("serve: --adapt per-request adapts the one draft to one request at a time: use --parallel 1")}
	}
	kname, err := checkKernels(c.ErrOrStderr())
	if err != nil {
		return err
	}
	lm, err := loadModel(f.model)
	if err != nil {
		return err
	}
	defer lm.Model.Close()
	model := server.Model{Name: lm.Name, Path: f.model, Llama: lm.Model, Tok: lm.Tok}
	if f.model == "" {
		// TinyStories writes stories, it does not chat: any markup would be
		// text it never saw, so messages become a plain prompt.
		model.Chat = chat.NewFamily(chat.Raw, "", "")
	}
	spec, closeSpec, err := serveSpeculation(c, f, lm, adapt, kname)
	if err != nil {
		return err
	}
	defer closeSpec()
	srv, err := server.New(server.Config{
		Model:  model,
		APIKey: f.apiKey, Parallel: f.parallel, Queue: f.queue, Threads: f.threads, Ctx: f.ctx,
		Speculation: spec, ShutdownTimeout: 10 * time.Second,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return fmt.Errorf("serve: %v", err)
	}
	if ip := net.ParseIP(f.host); f.apiKey == "" && (ip == nil || !ip.IsLoopback()) && f.host != "localhost" {
		fmt.Fprintf(c.ErrOrStderr(), "warning: listening on %s without --api-key: anyone who can reach it can use the model\n", f.host)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	drafting := "no draft"
	if spec != nil {
		drafting = "draft " + f.draft
	}
	fmt.Fprintf(c.ErrOrStderr(), "serving %s on http://%s (%d parallel, queue %d, %d threads, %s, adapt %s)\n",
		lm.Name, ln.Addr(), f.parallel, f.queue, f.threads, drafting, adapt.mode)
	if err := srv.Serve(ctx, ln); err != nil {
		return fmt.Errorf("serve: %v", err)
	}
	fmt.Fprintln(c.ErrOrStderr(), "stopped")
	return nil
}

// serveSpeculation sets up drafting for the server's slots: one DGF draft
// (adapting online, all slots feeding one trainer) or a drafter per slot,
// and the planner. The returned func releases it after the server closed,
// saving an adapted draft.
func serveSpeculation(c *cobra.Command, f serveFlags, lm *loaded, adapt adaptSettings, kname string) (*server.Speculation, func(), error) {
	none := func() {}
	per := max(1, f.threads/f.parallel)
	pool := cpu.NewPool(per) // the draft's host device and the profile
	kind, _, _ := strings.Cut(f.draft, ":")
	sp := &server.Speculation{Tree: f.tree}
	release := pool.Close
	switch kind {
	case "none":
		pool.Close()
		return nil, none, nil
	case "ngram":
		sp.NewDrafter = func(int) (engine.Drafter, func(), error) { return &engine.NgramDrafter{}, none, nil }
	case "auto", "dgf":
		ck, where, err := dgfCheckpoint(f.draft, lm, c.ErrOrStderr())
		if err != nil {
			pool.Close()
			return nil, none, err
		}
		if ck == nil && adapt.mode != engine.AdaptBackground {
			pool.Close()
			return nil, none, nil
		}
		if adapt.mode == engine.AdaptOff {
			// Each slot runs its own sequence of its own copy.
			sp.NewDrafter = func(int) (engine.Drafter, func(), error) {
				return dgfDrafter(ck, where, lm, pool, f.ctx, draftOptions{adapt: adapt, warn: c.ErrOrStderr()})
			}
			break
		}
		a, err := newAdaptive(ck, where, lm, pool, f.ctx, false, adapt, c.ErrOrStderr())
		if err != nil {
			pool.Close()
			return nil, none, err
		}
		sp.NewDrafter = func(slot int) (engine.Drafter, func(), error) {
			if slot == 0 {
				return a.drafter, none, nil
			}
			return a.newDrafter(f.ctx, false), none, nil
		}
		release = func() {
			if err := a.Close(); err != nil {
				fmt.Fprintf(c.ErrOrStderr(), "warning: %v\n", err)
			}
			pool.Close()
		}
	default:
		pool.Close()
		return nil, none, usageError{fmt.Errorf("serve: --draft %q: want none, ngram, dgf:PATH or auto", f.draft)}
	}
	if f.plan {
		target := cpu.NewTarget(lm.Model, pool, f.ctx)
		pl, err := plannerFor(target, lm, kname, per, f.tree.TopK, c.ErrOrStderr())
		if err != nil {
			release()
			return nil, none, err
		}
		sp.Planner = pl
	}
	return sp, release, nil
}
