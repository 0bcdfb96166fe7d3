// Command dovetail-desktop is Dovetail's desktop app: chat with a model,
// see speculation and learning as they happen, set up the machine.
package main

import (
	"flag"
	"fmt"
	"os"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"

	"dovetail/app/desktop"
	"dovetail/app/server"
)

func main() {
	skip := flag.Bool("skip-setup", false, "start with the defaults, without the setup wizard")
	model := flag.String("m", "", "a GGUF model file to open (default: the last one, or the embedded model)")
	shots := flag.String("screenshots", "", "drive the app through its views, write screenshots to this folder, and quit")
	flag.Parse()
	fy := app.NewWithID("io.dovetail.desktop")
	a, err := desktop.New(fy, desktop.Options{SkipSetup: *skip || *shots != "", Model: *model, StartAPI: server.Start})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dovetail-desktop:", err)
		os.Exit(1)
	}
	code := 0
	if *shots != "" {
		a.Tour(*shots, []string{"Once upon a time", "Once upon a time", "Tell me about a cat"}, func(err error) {
			if err != nil {
				fmt.Fprintln(os.Stderr, "dovetail-desktop:", err)
				code = 1
			}
			fyne.Do(fy.Quit)
		})
	} else {
		a.Start()
	}
	a.Window().ShowAndRun()
	a.Close()
	os.Exit(code)
}
