//go:build !linux

package osthread

import "errors"

func idle() error { return errors.New("idle scheduling is not supported on this system") }
