package desktop

import (
	"os"
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"dovetail/internal/golden"
	"dovetail/models/gguf"
)

// objectsIn is o and everything drawn inside it: containers' objects and
// widgets' renderers', depth first.
func objectsIn(o fyne.CanvasObject) []fyne.CanvasObject {
	out := []fyne.CanvasObject{o}
	switch x := o.(type) {
	case *fyne.Container:
		for _, c := range x.Objects {
			out = append(out, objectsIn(c)...)
		}
	case fyne.Widget:
		for _, c := range test.WidgetRenderer(x).Objects() {
			out = append(out, objectsIn(c)...)
		}
	}
	return out
}

// topOverlay is what the window shows over its content (a dialog), or
// fails the test.
func topOverlay(t *testing.T, a *App) fyne.CanvasObject {
	t.Helper()
	top := a.win.Canvas().Overlays().Top()
	if top == nil {
		t.Fatal("no dialog is shown")
	}
	return top
}

// labels are the texts of the labels inside o that show.
func labels(o fyne.CanvasObject) []string {
	var out []string
	for _, x := range objectsIn(o) {
		if l, ok := x.(*widget.Label); ok && l.Visible() {
			out = append(out, l.Text)
		}
	}
	return out
}

// tapButton taps the button inside o that says text.
func tapButton(t *testing.T, o fyne.CanvasObject, text string) {
	t.Helper()
	var seen []string
	for _, x := range objectsIn(o) {
		if b, ok := x.(*widget.Button); ok {
			if b.Text == text {
				test.Tap(b)
				return
			}
			seen = append(seen, b.Text)
		}
	}
	t.Fatalf("no %q button, only %q", text, seen)
}

// copyModel copies a test model into dir as name.
func copyModel(t *testing.T, model, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(golden.ModelPath(model))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// withChatTemplate writes a test model with a chat template added: a
// chat model, as the test models are not.
func withChatTemplate(t *testing.T, model, path string) {
	t.Helper()
	f, err := gguf.Open(golden.ModelPath(model))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		w.Set(kv.Key, kv.Value)
	}
	w.Set("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}\n{% endfor %}")
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}
