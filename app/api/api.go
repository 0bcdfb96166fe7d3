// Package api is the HTTP API as the front ends that start it see it:
// what they configure (Config) and what they run (Server). app/server
// implements it; the binaries' mains hand server.Start to the command line
// and the desktop app, so that no front end imports another.
package api

import (
	"context"
	"net"
	"time"

	"dovetail/app/runner"
	"dovetail/app/runner/pull"
)

// Config sets up a server.
type Config struct {
	// Models are the models the server runs by name, loaded as requests
	// name them (runner.NewFleet). Or Runner: one model, loaded already.
	Models *runner.Fleet
	Runner *runner.Runner
	// ReserveSlots leaves Runner's first slots to the caller (the desktop
	// app chats on slot 0 while the server answers on the others).
	ReserveSlots int
	APIKey       string // required on every route but /health (empty: none)
	Queue        int    // requests that may wait for a model's slot (< 0: 0)
	// ShutdownTimeout is how long Serve lets running generations finish
	// once its context is cancelled before it cancels them (0:
	// DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// CORSOrigins are browser origins allowed to call the API besides the
	// defaults, ollama's: pages on this machine (http and https on
	// localhost, 127.0.0.1, 0.0.0.0 and [::1], any port) and app://,
	// file://, tauri://, vscode-webview:// and vscode-file:// pages.
	// "https://ui.example:*" style patterns ("*": any port, "*.example":
	// its subdomains), or "*" for every origin. A request from any other
	// page is refused (403).
	CORSOrigins []string
	// AllowedHosts are the Host header names answered besides loopback
	// names and addresses (localhost, *.localhost, 127.0.0.0/8, ::1):
	// names or addresses, or "*" for any. Other names are refused (403),
	// against DNS rebinding, unless the server listens on an address
	// other than loopback (then every name is answered, as by ollama).
	AllowedHosts []string
	// Pulls is where /api/pull puts models and how it reaches registries
	// (Dir "": pull.Dir(), the user's models folder); /api/delete and
	// /api/copy touch only the models pulled there.
	Pulls pull.Options
}

// DefaultShutdownTimeout is Config.ShutdownTimeout's default: well inside
// the 10 s that `docker stop` and systemd give a service before they kill
// it, with the second the runner takes to save its adapted draft after.
const DefaultShutdownTimeout = 5 * time.Second

// Server answers API requests on a listener until its context ends, then
// lets running generations finish (Config.ShutdownTimeout). Close it
// afterwards; the models are the caller's to close after.
type Server interface {
	Serve(ctx context.Context, ln net.Listener) error
	// Forget drops what the server keeps of a runner its fleet unloaded.
	Forget(r *runner.Runner)
	Close()
}

// Start makes a Server of cfg (server.Start), or says why it cannot.
type Start func(cfg Config) (Server, error)
