// Command dovetail runs language models fast on the CPU, with speculative
// decoding from a small draft model. It is the headless binary: CLI, local
// API server and hardware probe.
package main

import (
	"os"

	"dovetail/app/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
