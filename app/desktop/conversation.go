package desktop

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"dovetail/app/runner/store"
	"dovetail/engine"
)

// Conversation is one chat, kept in the user's data directory.
type Conversation struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Model    string    `json:"model"` // the name it was held with
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	Updated  time.Time `json:"updated"`
}

// Message is one turn. An assistant's keeps where each piece of its text
// came from (Segments) and what its generation measured.
type Message struct {
	Role     string    `json:"role"`
	Content  string    `json:"content"`
	Segments []Segment `json:"segments,omitempty"`
	Stats    *MsgStats `json:"stats,omitempty"`
	// Error is a failed reply's, from versions that kept them; a failed
	// reply is no longer kept.
	Error string `json:"error,omitempty"`
	// Prompt is the text a completion model's reply continues, shown in
	// front of it (not part of it: not copied, not sent again).
	Prompt string `json:"prompt,omitempty"`
	// Completion: a completion model wrote the reply (no chat template).
	Completion bool `json:"completion,omitempty"`
	// Note says what the reply's prompt left out (the oldest turns, when
	// the conversation outgrew the context).
	Note string    `json:"note,omitempty"`
	At   time.Time `json:"at"`
}

// Segment is a run of text from one source: the target's own tokens, the
// draft's it accepted, or the text memory's.
type Segment struct {
	Text   string        `json:"text"`
	Source engine.Source `json:"source"`
}

// MsgStats is what one reply's generation measured.
type MsgStats struct {
	Tokens       int     `json:"tokens"`
	TokensPerSec float64 `json:"tokens_per_s"`
	FirstTokenMs float64 `json:"first_token_ms"`
	Rounds       int     `json:"rounds"`
	Tau          float64 `json:"tau"`
	// Speedup is the speed over the target alone (0: unknown).
	Speedup      float64 `json:"speedup"`
	DraftVersion int     `json:"draft_version"`
	Stopped      bool    `json:"stopped,omitempty"`
	// Drafted: the model ran with a draft. PlainSteps are its decode
	// steps without one, while the planner had speculation off.
	Drafted    bool `json:"drafted,omitempty"`
	PlainSteps int  `json:"plain_steps,omitempty"`
	// Baseline is the target alone's speed on this machine, tokens/s,
	// that Speedup compares with (0: unknown).
	Baseline float64 `json:"baseline_tokens_per_s,omitempty"`
	// ContextFull: the reply ended because the context had no room left.
	ContextFull bool `json:"context_full,omitempty"`
}

// newID is a conversation's file name: its start time and some randomness.
func newID() string {
	var b [4]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// title is a conversation's name: the start of its first message.
func title(c *Conversation) string {
	for _, m := range c.Messages {
		if m.Role == "user" {
			t := strings.Join(strings.Fields(m.Content), " ")
			if r := []rune(t); len(r) > 48 {
				t = string(r[:48]) + "…"
			}
			return t
		}
	}
	return "New chat"
}

// conversations keeps the chats as files, private to the user.
type conversations struct{ st *store.Store }

func (cs conversations) path(id string) string {
	return filepath.Join(cs.st.ConversationsDir(), id+".json")
}

// save writes c atomically (0600 in a 0700 directory).
func (cs conversations) save(c *Conversation) error {
	if strings.ContainsAny(c.ID, `/\`) || c.ID == "" {
		return fmt.Errorf("conversation id %q", c.ID)
	}
	c.Title, c.Updated = title(c), time.Now().UTC()
	return cs.st.WriteFile(cs.path(c.ID), true, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(c)
	})
}

// load reads a conversation.
func (cs conversations) load(id string) (*Conversation, error) {
	b, err := os.ReadFile(cs.path(id))
	if err != nil {
		return nil, err
	}
	var c Conversation
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("conversation %s: %w", id, err)
	}
	return &c, nil
}

// list reads every conversation, newest first; unreadable files are
// skipped (and kept).
func (cs conversations) list() []*Conversation {
	ents, err := os.ReadDir(cs.st.ConversationsDir())
	if err != nil {
		return nil
	}
	var out []*Conversation
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		if c, err := cs.load(id); err == nil {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Updated.After(out[j].Updated) })
	return out
}

// remove deletes a conversation.
func (cs conversations) remove(id string) error {
	err := os.Remove(cs.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
