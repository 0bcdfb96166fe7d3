package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopSignals are the signals that stop a command as Ctrl-C does: it
// stops at the next token, saves what it keeps (the adapted draft, a
// distillation's samples) and exits 130. SIGTERM is what docker stop,
// systemd and kill send; its default would kill the process unsaved.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// interruptible is a context cancelled at the first of stopSignals.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), stopSignals...)
}
