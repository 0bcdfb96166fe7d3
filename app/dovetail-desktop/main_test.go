package main

import (
	"bufio"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The app in a real window on an X server (Xvfb): the screenshot tour
// drives it through the setup, a chat and the speed and learning view,
// and each screenshot is the whole window, drawn. Without Xvfb and xwd
// (apt-get install xvfb x11-apps) it is skipped; CI installs them.
func TestTourInRealWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the app and runs it")
	}
	for _, tool := range []string{"Xvfb", "xwd", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "dovetail-desktop")
	if out, err := exec.Command("go", "build", "-tags", "no_animations", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	display := startXvfb(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shots := filepath.Join(dir, "shots")
	cmd := exec.CommandContext(ctx, bin, "--screenshots", shots)
	home := filepath.Join(dir, "home")
	cmd.Env = append(os.Environ(), "DISPLAY="+display, "HOME="+home, "XDG_CONFIG_HOME="+home+"/config",
		"XDG_DATA_HOME="+home+"/data", "XDG_CACHE_HOME="+home+"/cache", "FYNE_SCALE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the tour: %v\n%s", err, out)
	}
	seen := map[string]string{}
	for _, name := range []string{"wizard.png", "chat.png", "learning.png"} {
		img := readPNG(t, filepath.Join(shots, name))
		if b := img.Bounds(); b.Dx() != 1100 || b.Dy() != 760 {
			t.Errorf("%s is %v, want the 1100×760 window", name, b.Size())
		}
		colours, sig := palette(img)
		if colours < 40 {
			t.Errorf("%s has %d colours: nothing drawn", name, colours)
		}
		if other, ok := seen[sig]; ok {
			t.Errorf("%s is the same picture as %s", name, other)
		}
		seen[sig] = name
	}
	if _, err := os.Stat(filepath.Join(home, "data", "dovetail", "conversations")); err != nil {
		t.Errorf("the tour's chat was not saved: %v", err)
	}
}

// startXvfb starts an X server on a free display and returns its name.
func startXvfb(t *testing.T) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	x := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1280x900x24", "-nolisten", "tcp")
	x.ExtraFiles = []*os.File{w}
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { x.Process.Kill(); x.Wait() })
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("Xvfb gave no display: %v", err)
	}
	return ":" + strings.TrimSpace(line)
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// palette counts an image's colours and gives a signature of its pixels.
func palette(img image.Image) (int, string) {
	colours := map[[3]uint32]bool{}
	var sig strings.Builder
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
			if x%37 == 0 && y%29 == 0 {
				sig.WriteByte(byte(r>>8) ^ byte(g>>8) ^ byte(bl>>8))
			}
		}
	}
	return len(colours), sig.String()
}
