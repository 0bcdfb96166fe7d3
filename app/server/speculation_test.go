package server_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"

	"dovetail/app/server"
	"dovetail/engine"
)

// With a drafter in every slot the server answers with the same text,
// and its statistics show the speculative rounds.
func TestSpeculationSameText(t *testing.T) {
	const n = 40
	want := cliRun(t, prompt, n)
	closed := 0
	ts := start(t, server.Config{Parallel: 2, Speculation: &server.Speculation{
		NewDrafter: func(int) (engine.Drafter, func(), error) {
			return &engine.NgramDrafter{}, func() { closed++ }, nil
		},
		Tree: engine.LaptopTree,
	}})
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
	if st := extension(t, res.JSON.ExtraFields["dovetail"].Raw()); *st.Rounds == 0 {
		t.Errorf("no speculative rounds: %+v", st)
	}
	ts.stop()
	if closed != 2 {
		t.Errorf("%d of 2 drafters released", closed)
	}
}
