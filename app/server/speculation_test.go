package server_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"

	"dovetail/app/runner"
	"dovetail/app/server"
	"dovetail/engine"
	"dovetail/engine/drafters"
	"dovetail/engine/tree"
)

// versioned is a drafter whose weights are at version 7 (as an adapting
// draft's would be after seven publications); it counts its closing.
type versioned struct {
	drafters.Ngram
	closed *int
}

func (*versioned) Version() int { return 7 }

func (v *versioned) Close() error { *v.closed++; return nil }

// With a drafter in every slot the server answers with the same text,
// and its statistics show the speculative rounds and the draft's version.
func TestSpeculationSameText(t *testing.T) {
	const n = 40
	want := cliRun(t, prompt, n)
	closed := 0
	o := testOptions()
	o.Slots, o.Tree = 2, tree.Laptop
	o.NewDrafter = func(int) (engine.Drafter, error) { return &versioned{closed: &closed}, nil }
	r, err := runner.New(tinyModel(t), o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ts := startFleet(t, server.Config{Runner: r})
	c := client(ts, "")
	res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:       "default",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(n),
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Text; got != want {
		t.Errorf("with speculation\n%q\nwant (dovetail run)\n%q", got, want)
	}
	st := extension(t, res.JSON.ExtraFields["dovetail"].Raw())
	if *st.Rounds == 0 {
		t.Errorf("no speculative rounds: %+v", st)
	}
	if st.DraftVersion == nil || *st.DraftVersion != 7 {
		t.Errorf("draft_version %v, want the drafter's 7", st.DraftVersion)
	}
	ts.stop()
	if err := r.Close(); err != nil || closed != 2 {
		t.Errorf("%d of 2 drafters released (%v)", closed, err)
	}
}
