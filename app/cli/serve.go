package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"dovetail/app/server"
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
	if _, err := checkKernels(c.ErrOrStderr()); err != nil {
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
	srv, err := server.New(server.Config{
		Model:  model,
		APIKey: f.apiKey, Parallel: f.parallel, Queue: f.queue, Threads: f.threads, Ctx: f.ctx,
		ShutdownTimeout: 10 * time.Second,
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
	fmt.Fprintf(c.ErrOrStderr(), "serving %s on http://%s (%d parallel, queue %d, %d threads)\n",
		lm.Name, ln.Addr(), f.parallel, f.queue, f.threads)
	if err := srv.Serve(ctx, ln); err != nil {
		return fmt.Errorf("serve: %v", err)
	}
	fmt.Fprintln(c.ErrOrStderr(), "stopped")
	return nil
}
