// Command dovetail runs language models fast on the CPU, with speculative
// decoding from a small draft model. It is the headless binary: CLI, local
// API server and hardware probe.
package main

import (
	"os"

	"dovetail/app/cli"
	"dovetail/app/server"
)

// main wires the API server into the command line: the one place the two
// front ends meet.
func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, server.Start)) }
