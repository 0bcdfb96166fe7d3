package desktop

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"dovetail/app/runner/store"
	"dovetail/engine"
)

// Conversations are private files; an unreadable one is skipped and
// kept; the newest comes first; a title is the first message's start.
func TestConversationFiles(t *testing.T) {
	st := store.At(t.TempDir())
	cs := conversations{st}
	long := strings.Repeat("word ", 30)
	for _, text := range []string{"first", long} {
		c := &Conversation{ID: newID() + text[:1], Messages: []Message{{Role: "user", Content: text}}}
		if err := cs.save(c); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(st.ConversationsDir(), "broken.json")
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	list := cs.list()
	if len(list) != 2 || list[1].Title != "first" || !strings.HasSuffix(list[0].Title, "…") || len([]rune(list[0].Title)) != 49 {
		t.Fatalf("listed %d: %q", len(list), titles(list))
	}
	if _, err := os.Stat(bad); err != nil {
		t.Error("the unreadable conversation was not kept")
	}
	fi, err := os.Stat(cs.path(list[0].ID))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a conversation's file: %v, %v", fi.Mode(), err)
	}
	if err := cs.save(&Conversation{ID: "../escape"}); err == nil {
		t.Error("an id naming another directory was saved")
	}
	if err := cs.remove(list[0].ID); err != nil || len(cs.list()) != 1 {
		t.Errorf("remove: %v", err)
	}
}

func titles(cs []*Conversation) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Title)
	}
	return out
}

// A damaged settings file is set aside and the defaults stand.
func TestPrefsDamaged(t *testing.T) {
	st := store.At(t.TempDir())
	p := defaultPrefs()
	p.Threads, p.Highlight = 3, false
	if err := savePrefs(st, p); err != nil {
		t.Fatal(err)
	}
	if got := loadPrefs(st); got.Threads != 3 || got.Highlight {
		t.Fatalf("read back %+v", got)
	}
	os.WriteFile(st.AppSettingsPath(), []byte("not json"), 0o600)
	if got := loadPrefs(st); got.Threads != 0 || !got.Highlight || got.APIAddress != "127.0.0.1:11435" {
		t.Errorf("from a damaged file: %+v", got)
	}
	if _, err := os.Stat(st.AppSettingsPath() + ".corrupt"); err != nil {
		t.Errorf("the damaged file was not set aside: %v", err)
	}
}

// Fenced code blocks are found for their copy buttons; an unclosed one
// is not.
func TestCodeBlocks(t *testing.T) {
	md := "text\n```go\nfunc f() {}\n\nx := 1\n```\nmore\n  ```\nls -l\n  ```\n```\nunclosed"
	got := codeBlocks(md)
	if want := []string{"func f() {}\n\nx := 1", "ls -l"}; !slices.Equal(got, want) {
		t.Errorf("code blocks %q, want %q", got, want)
	}
}

// Pieces from one source join; a new source starts a segment; empty
// pieces vanish.
func TestAppendSegment(t *testing.T) {
	var s []Segment
	for _, p := range []struct {
		text string
		src  engine.Source
	}{{"Once", engine.FromTarget}, {" upon", engine.FromTarget}, {"", engine.FromDraft}, {" a", engine.FromDraft}, {" time", engine.FromMemory}} {
		s = appendSegment(s, p.text, p.src)
	}
	want := []Segment{{"Once upon", engine.FromTarget}, {" a", engine.FromDraft}, {" time", engine.FromMemory}}
	if !slices.Equal(s, want) {
		t.Errorf("segments %+v", s)
	}
}
