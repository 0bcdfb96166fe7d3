// Package runner is the runtime every front end shares (the CLI, the HTTP
// server, the desktop app): it opens models, places the work on devices
// under one memory budget, builds the targets (one packed copy of the
// weights for every sequence), opens drafters through one switch, owns
// online adaptation and its persistence, the planner's profile cache,
// distillation and the workload replay, and keeps the user's files through
// its store.
//
// It never prints and never reads flags: it takes options and returns
// values, errors and notices, which the front end shows.
package runner
