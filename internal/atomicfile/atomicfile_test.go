package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, func(w io.Writer) error { _, err := w.Write([]byte("good")); return err }); err != nil {
		t.Fatal(err)
	}
	// A failed write leaves the good file and no temporary file behind.
	boom := errors.New("boom")
	if err := Write(path, func(w io.Writer) error { w.Write([]byte("half")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "good" {
		t.Errorf("after a failed write: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory, want 1", len(ents))
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v", st.Mode(), err)
	}
}

// WriteMode makes a private file private from its first byte on.
func TestWriteMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	err := WriteMode(path, 0o600, func(w io.Writer) error {
		st, err := w.(*os.File).Stat()
		if err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("written while mode %v", st.Mode())
		}
		_, err = w.Write([]byte("text"))
		return err
	})
	if st, serr := os.Stat(path); err != nil || serr != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v %v", st.Mode(), err, serr)
	}
}

// WriteNewMode never replaces a file, and leaves no temporary file.
func TestWriteNewMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(path, []byte("GGUF weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := func(w io.Writer) error { _, err := w.Write([]byte("{}")); return err }
	if err := WriteNewMode(path, 0o600, text); !errors.Is(err, os.ErrExist) {
		t.Errorf("over an existing file: %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "GGUF weights" {
		t.Errorf("the existing file holds %q", b)
	}
	fresh := filepath.Join(dir, "conv.json")
	if err := WriteNewMode(fresh, 0o600, text); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("new file: %v %v", st, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d files in the directory, want 2", len(ents))
	}
}
