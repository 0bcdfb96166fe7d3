package store

import (
	"os"
	"testing"
)

// Shelve sets the installed draft back as the previous one, leaving none
// installed (the shipped one drafts); Restore brings it back; with none
// installed Shelve says so.
func TestShelve(t *testing.T) {
	s := At(t.TempDir())
	if err := s.Shelve(fp('a')); err == nil {
		t.Fatal("shelved a draft never installed")
	}
	if _, _, err := s.Install(checkpoint(fp('a'), "x.gguf", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Shelve(fp('a')); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.DraftPath(fp('a'))); !os.IsNotExist(err) {
		t.Fatalf("a draft still installed after Shelve: %v", err)
	}
	if _, err := os.Stat(s.PrevPath(fp('a'))); err != nil {
		t.Fatalf("not kept as the previous draft: %v", err)
	}
	if err := s.Restore(fp('a')); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.DraftPath(fp('a'))); err != nil {
		t.Fatalf("not installed again after Restore: %v", err)
	}
}
