package desktop

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"fyne.io/fyne/v2"

	"dovetail/internal/xwd"
)

// Tour drives the app through its views and writes a screenshot of each
// to dir: the setup wizard's fit, a chat with a reply streamed, the speed
// and learning view, the settings. It says on stderr how often each reply
// was redrawn as it streamed. It runs on its own goroutine in a real window, and
// calls done with its error.
func (a *App) Tour(dir string, prompts []string, done func(error)) {
	go func() { done(a.tour(dir, prompts)) }()
}

// tourTokens bounds the tour's replies: a screenful.
const tourTokens = 160

func (a *App) tour(dir string, prompts []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	shot := func(name string) error {
		time.Sleep(time.Second) // frames drawn
		img, err := a.screenshot()
		if err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		defer f.Close()
		return png.Encode(f, img)
	}
	waitFor := func(what string, cond func() bool) error {
		for deadline := time.Now().Add(5 * time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("tour: %s never happened", what)
			}
		}
		return nil
	}
	fyne.DoAndWait(a.showWizard)
	for step := 1; step <= 3; step++ {
		if err := waitFor("the wizard's step", func() bool { return !a.wizard.busy() }); err != nil {
			return err
		}
		fyne.DoAndWait(a.wizard.forward)
	}
	if err := waitFor("the fit", func() bool { return !a.wizard.busy() }); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "tour: setup predicts %s\n", a.wizard.predictions())
	if err := shot("wizard.png"); err != nil {
		return err
	}
	fyne.DoAndWait(a.wizard.forward)
	fyne.DoAndWait(a.wizard.forward) // save, and chat
	if err := waitFor("the model", func() bool { r, _ := a.sess.loaded(); return r != nil && !a.chat.isLoading() }); err != nil {
		return err
	}
	fyne.DoAndWait(func() { a.chat.sampling["max_tokens"].SetText(strconv.Itoa(tourTokens)) })
	for i, p := range prompts {
		fyne.DoAndWait(func() { a.chat.input.SetText(p); a.chat.sendMessage() })
		lag := pingUI(func() bool { return !a.chat.isBusy() })
		if err := waitFor("the reply", func() bool { return !a.chat.isBusy() }); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "tour: reply %d: %s; %s; the UI answered in %s\n", i+1, a.chat.lastSpeed(), a.chat.redraws(), <-lag)
	}
	if err := shot("chat.png"); err != nil {
		return err
	}
	if err := a.smallShot(shot); err != nil {
		return err
	}
	fyne.DoAndWait(func() { a.tabs.SelectIndex(1); a.learn.refresh() })
	if err := shot("learning.png"); err != nil {
		return err
	}
	fyne.DoAndWait(func() { a.tabs.SelectIndex(2) })
	if err := shot("settings.png"); err != nil {
		return err
	}
	return a.get.tourShot(shot)
}

// screenshot is the window as the X server shows it (xwd), cut to the
// window's size; without an X display, the canvas's own capture.
func (a *App) screenshot() (image.Image, error) {
	var w, h int
	fyne.DoAndWait(func() {
		c := a.win.Canvas()
		w, h = c.PixelCoordinateForPosition(fyne.NewPos(c.Size().Width, c.Size().Height))
	})
	display := os.Getenv("DISPLAY")
	if _, err := exec.LookPath("xwd"); err != nil || display == "" {
		var img image.Image
		fyne.DoAndWait(func() { img = a.win.Canvas().Capture() })
		return img, nil
	}
	out, err := exec.Command("xwd", "-root", "-silent", "-display", display).Output()
	if err != nil {
		return nil, fmt.Errorf("xwd: %w", err)
	}
	img, err := xwd.Decode(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	r := image.Rect(0, 0, w, h).Intersect(img.Bounds())
	cut := image.NewRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
	draw.Draw(cut, cut.Bounds(), img, r.Min, draw.Src)
	return cut, nil
}

// pingUI asks the UI goroutine to run an empty function every 50 ms until
// done, and says how long it took to answer: whether the window stays
// responsive while a reply streams.
func pingUI(done func() bool) <-chan string {
	out := make(chan string, 1)
	go func() {
		var lags []time.Duration
		for !done() {
			t := time.Now()
			fyne.DoAndWait(func() {})
			lags = append(lags, time.Since(t))
			time.Sleep(50 * time.Millisecond)
		}
		if len(lags) == 0 {
			out <- "no time to ask"
			return
		}
		slices.Sort(lags)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		out <- fmt.Sprintf("median %.1f ms, max %.1f ms (%d asks)", ms(lags[len(lags)/2]), ms(lags[len(lags)-1]), len(lags))
	}()
	return out
}
