package cli

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"dovetail/app/api"
	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/runner/store"
	"dovetail/engine/adapt"
)

type serveFlags struct {
	modelFlags
	host      string
	port      int
	apiKey    string
	allowHost []string
	parallel  int
	queue     int
	models    string
	maxLoaded int
	keepAlive time.Duration
	cors      []string
	grace     time.Duration
}

func newServeCmd(start api.Start) *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve [-m MODEL.gguf] [--host 127.0.0.1] [--port 11435]",
		Short: "Serve an OpenAI-compatible API (chat, completions, embeddings, models, health, metrics)",
		Long: "Serve models over HTTP with OpenAI's API (POST /v1/chat/completions and /v1/completions,\n" +
			"streamed with \"stream\": true; POST /v1/embeddings; GET /v1/models) and ollama's (/api/chat,\n" +
			"/api/generate, /api/embed, /api/embeddings, /api/tags, /api/show, /api/ps, /api/version,\n" +
			"/api/pull, /api/delete, /api/copy),\n" +
			"plus /health and Prometheus /metrics.\n" +
			"-m serves one model (a file, or a name as 'dovetail list' shows it); --models DIR serves\n" +
			"every model there, the models 'dovetail pull' fetched, and the user's ollama and LM Studio\n" +
			"models, each loaded when a request names it (/api/pull adds one, /api/delete and\n" +
			"/api/copy change only pulled ones). It listens on loopback only\n" +
			"unless --host says otherwise; SIGINT or SIGTERM stops it, letting running generations\n" +
			"finish for up to --shutdown-grace (5 s), then interrupts the draft's training step\n" +
			"and saves the adapted draft (the last version it published) before it exits.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("serve: unexpected argument %q (a model file goes after -m)", args[0])}
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error { return serve(c, f, start) },
	}
	f.modelFlags.register(c, draftHelp)
	fl := c.Flags()
	fl.StringVar(&f.host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface; use --api-key then)")
	fl.IntVar(&f.port, "port", 11435, "TCP port (0: any free port)")
	fl.StringVar(&f.apiKey, "api-key", "", "require 'Authorization: Bearer KEY' (Bearer in any case) on every request but /health (default: $DOVETAIL_API_KEY)")
	fl.IntVar(&f.parallel, "parallel", 1, "sequences generated at the same time, each with its own KV cache")
	fl.IntVar(&f.queue, "queue", 16, "requests that may wait for a free sequence; more get 429")
	fl.StringVar(&f.models, "models", "", "serve every GGUF model in this folder, and the user's pulled, ollama and LM Studio models, by name, loading each when a request names it")
	fl.IntVar(&f.maxLoaded, "max-loaded", 1, "with --models: models loaded at once")
	fl.DurationVar(&f.keepAlive, "keep-alive", 5*time.Minute, "with --models: how long an idle model stays loaded (negative: forever)")
	fl.StringArrayVar(&f.cors, "cors-origin", nil, "a browser origin allowed to call the API besides pages on this machine (localhost, 127.0.0.1, 0.0.0.0, any port) and app://, file://, tauri://, vscode-webview://, such as https://ui.example:* (repeatable; * allows every origin); pages of other origins are refused (403)")
	fl.StringSliceVar(&f.allowHost, "allow-host", nil, "a host name the API answers to besides loopback names and addresses and --host, such as mybox.lan (repeatable or comma-separated; * allows any); other Host headers are refused (403) against DNS rebinding, unless --host is not loopback")
	fl.DurationVar(&f.grace, "shutdown-grace", api.DefaultShutdownTimeout, "on SIGINT or SIGTERM, how long running generations may go on before they are cancelled (0: cancel them at once)")
	fl.Lookup("threads").Usage = "CPU threads, split between the parallel sequences (at most the machine's logical CPUs)"
	fl.Lookup("ctx").Usage = "context length per sequence (0: the model's)"
	return c
}

func serve(c *cobra.Command, f serveFlags, start api.Start) error {
	switch {
	case f.port < 0 || f.port > 65535:
		return usageError{fmt.Errorf("serve: --port %d out of range [0, 65535]", f.port)}
	case f.parallel < 1 || f.parallel > 256:
		return usageError{fmt.Errorf("serve: --parallel %d out of range [1, 256]", f.parallel)}
	case f.queue < 0:
		return usageError{fmt.Errorf("serve: --queue %d must not be negative", f.queue)}
	case f.grace < 0:
		return usageError{fmt.Errorf("serve: --shutdown-grace %v must not be negative", f.grace)}
	}
	if f.apiKey == "" {
		f.apiKey = os.Getenv("DOVETAIL_API_KEY")
	}
	stderr := c.ErrOrStderr()
	o, err := f.options(stderr)
	if err != nil {
		return err
	}
	o.Slots = f.parallel
	if start == nil {
		return fmt.Errorf("serve: this build has no API server")
	}
	cfg := api.Config{APIKey: f.apiKey, Queue: f.queue, ShutdownTimeout: max(f.grace, time.Nanosecond), CORSOrigins: f.cors}
	cfg.AllowedHosts = append(f.allowHost, f.host)
	var srv api.Server
	if f.models != "" {
		fleet, err := serveFleet(c, f, o, func(r *runner.Runner) { srv.Forget(r) })
		if err != nil {
			return err
		}
		defer fleet.Close()
		cfg.Models = fleet
	} else {
		_, r, done, err := openRunner(c, f.model, &o)
		if err != nil {
			return err
		}
		defer done()
		cfg.Runner = r
		keptOnDisk(stderr, r, o)
	}
	if srv, err = start(cfg); err != nil {
		return usageError{fmt.Errorf("serve: %v", err)}
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return fmt.Errorf("serve: %v", err)
	}
	if ip := net.ParseIP(f.host); f.apiKey == "" && (ip == nil || !ip.IsLoopback()) && f.host != "localhost" {
		fmt.Fprintf(stderr, "warning: listening on %s without --api-key: anyone who can reach it can use the model\n", f.host)
	}
	ctx, stop := interruptible()
	defer stop()
	if r := cfg.Runner; r != nil {
		info := r.Draft()
		fmt.Fprintf(stderr, "serving %q on http://%s (%d parallel, queue %d, %d threads each, draft %s, adapt %s)\n",
			r.Model().Name, ln.Addr(), r.Slots(), f.queue, r.Threads(), info.Name, info.Adapt)
	} else {
		var names []string
		for _, e := range cfg.Models.Entries() {
			names = append(names, e.Name)
		}
		if len(names) == 0 {
			names = []string{"none yet"}
		}
		fmt.Fprintf(stderr, "serving %d models on http://%s, %d loaded at a time, unloaded after %v idle: %s\n",
			len(cfg.Models.Entries()), ln.Addr(), f.maxLoaded, f.keepAlive, strings.Join(names, ", "))
		st, _ := store.Open()
		keptOnDiskBy(stderr, st, o.Adapt.Mode, o)
	}
	if err := srv.Serve(ctx, ln); err != nil {
		return fmt.Errorf("serve: %v", err)
	}
	fmt.Fprintln(stderr, "stopped")
	return nil
}

// serveFleet gathers the models of --models (and -m, and the user's
// pulled, ollama and LM Studio models) into a fleet that loads them on demand,
// each with the flags' options over its own settings.
func serveFleet(c *cobra.Command, f serveFlags, o runner.Options, onUnload func(*runner.Runner)) (*runner.Fleet, error) {
	paths := []string{f.models}
	if f.model != "" {
		path, _, err := modelPath(f.model)
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		if path != "" {
			paths = append(paths, path)
		}
	}
	home, _ := os.UserHomeDir()
	places := discover.UserPlaces(home)
	places.Paths = paths
	found, err := discover.Find(places)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if len(found) == 0 {
		// As ollama's, a server with no model yet is one to pull into.
		fmt.Fprintf(c.ErrOrStderr(), "no GGUF model in %s, nor pulled, ollama's or LM Studio's yet: /api/pull (or dovetail pull) adds one\n", f.models)
	}
	return runner.NewFleet(found, runner.FleetOptions{MaxLoaded: f.maxLoaded, KeepAlive: f.keepAlive, OnUnload: onUnload,
		Options: func(m *runner.Model) (runner.Options, error) {
			mo := o
			if err := applySettings(c, &mo, m); err != nil {
				return mo, err
			}
			return mo, nil
		}})
}

// keptOnDisk says what the server keeps of its requests on disk, where,
// and how to turn it off.
func keptOnDisk(w io.Writer, r *runner.Runner, o runner.Options) {
	keptOnDiskBy(w, r.Store(), r.Draft().Adapt, o)
}

// keptOnDiskBy says it for drafts adapting in mode, kept in st (nil:
// nowhere).
func keptOnDiskBy(w io.Writer, st *store.Store, mode adapt.Mode, o runner.Options) {
	switch {
	case st == nil || mode == adapt.Off || !o.Adapt.Save:
		fmt.Fprintln(w, "keeping nothing of the requests on disk")
	case o.Adapt.Engine.MemoryTokens > 0:
		fmt.Fprintf(w, "keeping the adapted draft and a text memory of the requests (up to %d tokens of prompts and replies) in %s; --adapt-no-save keeps nothing, --adapt-memory 0 keeps no text\n",
			o.Adapt.Engine.MemoryTokens, st.DraftsDir())
	default:
		fmt.Fprintf(w, "keeping the adapted draft (weights, no text) in %s; --adapt-no-save keeps nothing\n", st.DraftsDir())
	}
}
